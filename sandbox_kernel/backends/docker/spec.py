"""What a docker sandbox is made of: the container's settings from the backend's options, the
kernel's launcher and connection file, and the code the kernel runs to recover from a fork bomb.

``ipc`` transport (measured in docs/ENVIRONMENT): the session's host directory is mounted at
:data:`KERNEL_DIR`; the kernel binds its sockets there (``/kernel/k-1`` ... ``/kernel/k-5``) and
the host connects to the same files under the host path. Two views of one connection, one key.
Only for an engine whose bind mounts share this host's filesystem.

``api`` transport: nothing of the host is mounted. The container's command is the relay of
:mod:`.inside`, attached to the engine's stream (see :mod:`.bridge`); it writes the launcher
and connection file under /tmp and starts the kernel itself.
"""

from __future__ import annotations

import json
import os
import posixpath
import secrets
from pathlib import Path
from typing import Any

from ...core.errors import ConfigError, MountError
from ...runtime.traits import host_variables
from ..checkpoint.keeper import SOURCE as KEEPER_SOURCE
from ..egress.forwarder import PRELUDE
from ..egress.options import packages_environment
from ..kernel_client import KERNEL_ARGS, QUIET_KERNEL_ENV, history_args
from ..kernel_client.launcher import IOPUB_APP
from .boundary import load_docker
from .inside import BOOTSTRAP
from .inside import KERNEL_DIR as INSIDE_DIR
from .mounts import check_access, parse_gpus, parse_mounts
from .view import EMPTY, workdir_mounts

KERNEL_DIR = "/kernel"
PORTS = {"shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5}
# The root filesystem is read-only: every cache and config directory points into /tmp.
KERNEL_ENV = {"IPYTHONDIR": "/tmp/ipython", "JUPYTER_RUNTIME_DIR": "/tmp/jupyter/runtime",
              "MPLCONFIGDIR": "/tmp/matplotlib", "XDG_CACHE_HOME": "/tmp/cache", "XDG_CONFIG_HOME": "/tmp/config",
              "PYTHONDONTWRITEBYTECODE": "1", **QUIET_KERNEL_ENV}
OUTPUT_CHUNK = 1024**2
"""Characters of stdout/stderr per IOPub ``stream`` message at most (see :data:`LAUNCHER`)."""

POOL_TTL_VARIABLE = "SANDBOX_KERNEL_POOL_TTL"
"""A pooled ipc sandbox's launcher reads (and removes) it: seconds to wait for its claim."""

LAUNCHER = f"""\
# sandbox-kernel's launcher: ipykernel_launcher, except that stdout and stderr are published in
# pieces of at most {OUTPUT_CHUNK} characters, each flushed (the writer waits for the IO thread)
# before the next: one IOPub message, and what the host must hold at once, never grows with a
# cell's output. Falls back to plain ipykernel if its internals differ.
import sys

if sys.path and sys.path[0] in ("", "{KERNEL_DIR}", "{INSIDE_DIR}"):
    del sys.path[0]
""" + PRELUDE + f"""
try:
    from ipykernel.iostream import OutStream

    def _chunked(write, limit={OUTPUT_CHUNK}):
        def chunked_write(self, string):
            if not isinstance(string, str):
                return write(self, string)
            for start in range(0, len(string), limit) or [0]:
                piece = string[start:start + limit]
                write(self, piece)
                self._sandbox_pending = getattr(self, "_sandbox_pending", 0) + len(piece)
                if self._sandbox_pending >= limit:
                    self._sandbox_pending = 0
                    self.flush()
            return len(string)
        return chunked_write

    OutStream.write = _chunked(OutStream.write)
except Exception:
    pass
import os
import stat
import threading


_POOL_TTL = float(os.environ.pop("{POOL_TTL_VARIABLE}", "") or 0)


def _end_with_the_host():
    # stdin is the engine's attach of the host process (the ipc transport): when it ends,
    # that process stopped or lost the engine, and nobody can reach this kernel any more.
    # A pooled sandbox is claimed by a byte on stdin: none within its TTL, nobody took it.
    try:
        if _POOL_TTL:
            import select
            if not select.select([0], [], [], _POOL_TTL)[0]:
                os._exit(0)
        while os.read(0, 65536):
            pass
    except OSError:
        pass
    os._exit(0)


if stat.S_ISFIFO(os.fstat(0).st_mode):
    threading.Thread(target=_end_with_the_host, daemon=True).start()
""" + IOPUB_APP

PIDS_HEADROOM = 4
"""The container is at its pids limit when this close to it: the kernel cannot start threads."""
REAPER = """
def _sandbox_kernel_reap():
    import os, signal
    def parent_group(pid):
        try:
            with open(f'/proc/{pid}/stat') as f:
                fields = f.read().rsplit(')', 1)[1].split()
            return int(fields[1]), int(fields[2])
        except (OSError, IndexError, ValueError):
            return -1, -1
    keep, pid = {os.getpid(), 1}, os.getpid()
    while pid > 1:
        pid = parent_group(pid)[0]
        keep.add(pid)
    try:
        os.kill(-1, signal.SIGSTOP)
    except OSError:
        pass
    mine = []
    for pid in [int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) not in keep]:
        parent, group = parent_group(pid)
        if parent == 0 or (group == pid and parent in keep):
            keep.add(pid)
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
        if parent == os.getpid():
            mine.append(pid)
    for pid in keep - {os.getpid(), 1}:
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass
    for pid in mine:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
_sandbox_kernel_reap()
del _sandbox_kernel_reap
"""
"""Run silently in the kernel (uid != 0) at the pids limit: ``kill(-1, SIGSTOP)`` stops every
process the kernel may signal except itself and PID 1, so none forks any more; each is then
killed except the kernel's ancestors (the checkpoints' keeper, the api transport's relay, init),
the checkpoints' snapshots (each leads a process group of its own, and is a child of the kernel
or of an ancestor), and processes ``docker exec`` started (parent 0 in the container: a fork's
relay); those continue; then the kernel reaps the children it killed (zombies hold pids too;
the snapshots, its children too, live on)."""


def uid_gid(user: str) -> tuple[int, int]:
    """The numeric ``uid:gid`` of the kernel: ``user``, else 1000:1000 when this process runs as
    root or on Windows (no uids), else this process's own (so it can reach the sockets the kernel
    creates, with the ipc transport)."""
    if not user:
        own = (os.getuid(), os.getgid()) if hasattr(os, "geteuid") and os.geteuid() != 0 else (1000, 1000)
        user = "%d:%d" % own
    uid, _, gid = user.partition(":")
    return int(uid), int(gid or uid)


def prepare_hostdir(hostdir: Path, uid: int) -> dict[str, Any]:
    """Write the launcher and the container's view of the connection (ip: the socket path prefix
    inside the container) into ``hostdir``, let ``uid`` create its sockets there (until
    :func:`seal_hostdir`), and return the host's view of the connection."""
    common = {"transport": "ipc", "signature_scheme": "hmac-sha256", "key": secrets.token_hex(32),
              "kernel_name": "", **PORTS}
    (hostdir / "kernel.json").write_text(json.dumps({**common, "ip": f"{KERNEL_DIR}/k"}))
    (hostdir / "launch.py").write_text(LAUNCHER)
    (hostdir / "keeper.py").write_text(KEEPER_SOURCE)
    (hostdir / EMPTY).write_bytes(b"")  # what covers a file a bound workspace leaves out
    for path in (hostdir / "kernel.json", hostdir / "launch.py", hostdir / "keeper.py", hostdir / EMPTY):
        path.chmod(0o444)
    if os.geteuid() == 0:
        os.chown(hostdir, uid, -1)
    return {**common, "ip": f"{hostdir}/k"}


def seal_hostdir(hostdir: Path) -> None:
    """Once the kernel's sockets exist: root-owned and 0755, so sandbox code cannot add files to
    a host directory (only possible when this process runs as root)."""
    if os.geteuid() == 0:
        os.chown(hostdir, 0, 0)
        hostdir.chmod(0o755)


TMPFS_PAGE = 4096
"""Bytes per tmpfs block in ``nr_blocks`` (the page size of x86_64 and of most arm64 kernels)."""


def volume_options(size: int, uid: int, gid: int, podman: bool = False, shared: bool = False) -> dict[str, str]:
    """``driver_opts`` of the local driver for the working directory: a tmpfs of ``size`` bytes
    (0: no limit) owned by the kernel's uid. A volume, unlike a plain tmpfs mount, is reached by
    the archive API (uploads), also with a read-only root. ``shared``: owned by root with mode
    1777 instead (sticky, as ``/tmp``): a read-only workspace copy in it is root's, and the kernel
    can add files beside it but change or remove none of it.

    Podman (before 4.8, containers/podman#20449) takes ``size`` in ``o`` as a project quota and
    refuses it where the filesystem has none, so it gets tmpfs's own ``nr_blocks`` instead:
    the same limit in pages of :data:`TMPFS_PAGE` bytes."""
    limit = (f"nr_blocks={-(-size // TMPFS_PAGE)}," if podman else f"size={size},") if size else ""
    owner = "uid=0,gid=0,mode=1777" if shared else f"uid={uid},gid={gid},mode=0755"
    return {"type": "tmpfs", "device": "tmpfs", "o": limit + owner}


def host_mounts(backend: Any, uid: int, gid: int, engine_here: bool = True) -> list[dict[str, Any]]:
    """The ``mounts`` option as the engine's mount entries (see :mod:`.mounts`). The host paths
    are checked on this machine only when the engine runs here (``engine_here``); otherwise they
    name paths on the engine's host, which the engine itself refuses if missing.

    Raises:
        ConfigError: a bad entry, or an ``rw`` one the kernel's uid cannot write.
    """
    try:
        mounts = parse_mounts(list(backend.mounts), workdir=posixpath.normpath(backend.workdir), kernel_dir=KERNEL_DIR,
                              here=engine_here)
        if engine_here:
            check_access(mounts, uid, gid)
    except MountError as exc:
        raise ConfigError(f"Bad option for the docker backend: {exc}.") from None
    return [m.to_docker() for m in mounts]


def launcher_argv(directory: str, connection_file: str, history_file: str, keeper: bool = False,
                  stdin: bool = False) -> list[str]:
    """The kernel's command: :data:`LAUNCHER` as ``directory/launch.py`` on ``connection_file``.
    ``ipc``: both in the mounted :data:`KERNEL_DIR`; ``api``: in the relay's :data:`INSIDE_DIR`,
    with ``{connection_file}`` for the relay to fill in (see :mod:`.inside`). IPython keeps its
    history at ``history_file`` (a path inside the container, or ``:memory:``). With ``keeper``,
    the kernel runs as the child of the checkpoints' keeper (``directory/keeper.py``, its socket
    ``directory/keeper``; :mod:`..checkpoint.keeper`), which watches the container's stdin (the
    host's attach) when ``stdin``."""
    kernel = ["python", f"{directory}/launch.py", "-f", connection_file, *KERNEL_ARGS, *history_args(history_file)]
    if not keeper:
        return kernel
    return ["python", f"{directory}/keeper.py", f"{directory}/keeper", connection_file, *(["--stdin"] if stdin else []),
            "--", *kernel]


def runs_keeper(backend: Any) -> bool:
    """Whether the sandbox runs the checkpoints' keeper: checkpoints on, and a Python kernel."""
    return bool(backend.checkpoints) and not backend.kernel_name


def container_spec(backend: Any, name: str, hostdir: Path | None, volume: str, labels: dict[str, str],
                   engine_here: bool = True, egress: Any = None, plan: Any = None) -> dict[str, Any]:
    """Keyword arguments of ``client.containers.create`` for a :class:`DockerBackend`'s options:
    for the ``ipc`` transport with ``hostdir`` mounted at :data:`KERNEL_DIR`; for the ``api``
    transport (``hostdir`` None) running the relay with its standard input open for the attach.
    With ``egress`` (:class:`.proxy.Egress`), the proxy's volume and variables; the network stays
    ``backend.network`` (``none``). ``plan``: the workspace's (:mod:`.view`: bound on ``ipc``; on
    ``api`` it is copied later).

    Raises:
        ConfigError: a bad ``mounts`` entry.
    """
    docker = load_docker()
    uid, gid = uid_gid(backend.user)
    env = host_variables(backend.env_vars) | backend.env | packages_environment()
    if egress is not None:
        env |= egress.sandbox_environment()
    if hostdir is None:
        # detach=False: docker-py then sets StdinOnce, so the engine closes the relay's stdin when
        # the attach ends (this process stopped, or lost the engine), and the relay stops the kernel
        run = dict(entrypoint=["python", "-c", BOOTSTRAP], command=[], stdin_open=True, detach=False)
        kernel_mounts = []
    else:
        argv = launcher_argv(KERNEL_DIR, f"{KERNEL_DIR}/kernel.json", backend.history_file,
                             keeper=runs_keeper(backend), stdin=True)
        run = dict(stdin_open=True, detach=False, entrypoint=argv[:1], command=argv[1:])
        kernel_mounts = [docker.types.Mount(KERNEL_DIR, str(hostdir), type="bind")]
    spec: dict[str, Any] = dict(
        image=backend.image, labels=labels, hostname="sandbox", name=name, **run,
        user=f"{uid}:{gid}", working_dir=backend.workdir, environment={**KERNEL_ENV, **env},
        network_mode=backend.network, read_only=backend.read_only, init=backend.init,
        tmpfs={"/tmp": "mode=1777" + (f",size={backend.tmp_size}" if backend.tmp_size else "")},
        mounts=[*kernel_mounts,
                *workdir_mounts(plan, backend.workspace, backend.workdir,
                                docker.types.Mount(backend.workdir, volume, type="volume", no_copy=True), hostdir),
                *host_mounts(backend, uid, gid, engine_here),
                *([egress.sandbox_mount()] if egress is not None else [])],
        cap_drop=list(backend.cap_drop), security_opt=["no-new-privileges"] if backend.no_new_privileges else [],
        log_config=docker.types.LogConfig(type="json-file", config={"max-size": "1m", "max-file": "1"}),
    )
    if backend.memory_limit:
        spec.update(mem_limit=backend.memory_limit, memswap_limit=backend.memory_limit + backend.swap)
    if backend.pids_limit:
        spec["pids_limit"] = backend.pids_limit
    if backend.cpus:
        spec["nano_cpus"] = int(backend.cpus * 1e9)
    if backend.runtime:
        spec["runtime"] = backend.runtime
    if (count := parse_gpus(backend.gpus)) is not None:
        spec["device_requests"] = [docker.types.DeviceRequest(count=count, capabilities=[["gpu"]])]
    assert not any("docker.sock" in str(m.get("Source")) for m in spec["mounts"]), "never mount the engine"
    return spec

"""An engine per user: rootless Podman, started by root for one Linux user, so that user's docker
sandboxes run in an engine the user owns and no one else can reach (the ``docker`` group is root
on the host). The JupyterHub recipe (docs/how-to/jupyterhub.md) calls :func:`spawner_hook`; a shell, the
command ``sandbox-kernel user-engine start USER``.

What :func:`start` does, each step skipped when already done (measured on Debian 12, Podman 4.3.1,
cgroup v1, no systemd):
- ``/run/user/UID`` (0700, the user's), as pam_systemd would make it, and ``podman/`` in it;
- ``~/.config/containers/storage.conf`` with the overlay driver when the user has none (Podman
  otherwise picked vfs here: a full copy of every layer per container);
- a cgroup per user, ``sandbox-kernel/USER`` in the memory, pids and cpu hierarchies, with the
  user's limits: rootless Podman cannot limit a container on cgroup v1, so this bounds all of the
  user's sandboxes together (measured: a fork loop stopped at the pids limit, a memory bomb was
  OOM-killed at the memory limit, the engine lived on; the OOM killer may take a second process
  of the cgroup, another sandbox's kernel, while the first one's memory is freed: docs/how-to/jupyterhub.md);
- ``podman system service --time=0`` as the user, in that cgroup, on
  ``/run/user/UID/podman/podman.sock`` (only the user can connect);
- the sandbox image copied from the machine's engine into the user's storage when missing or
  different (``GET /images/{name}/get`` piped into ``podman load``: about 25 s for 745 MB).
Needs root, the user's subordinate ids (``/etc/subuid``, ``/etc/subgid``: useradd adds them),
``podman``, ``uidmap`` and ``setpriv`` (util-linux).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.errors import BackendUnavailable, ConfigError, Missing, SandboxError
from .boundary import engine_errors, host, load_docker

_log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
STATE_DIR = Path("/run/sandbox-kernel")
"""Root's folder of each engine's pid and log (never the user's runtime folder: root writing
there would follow a link the user put in its place)."""
CGROUP_NAME = "sandbox-kernel"
STORAGE_CONF = '[storage]\ndriver = "overlay"\n'
READY_S = 30.0


@dataclass(frozen=True)
class Limits:
    """What all of one user's sandboxes may use together; None: no limit."""

    memory: int | None = None  # bytes, memory and swap together
    pids: int | None = None  # processes and threads
    cpus: float | None = None  # CPUs


@dataclass(frozen=True)
class UserEngine:
    """Where one user's engine is: ``user`` (a pwd entry) and its paths."""

    user: Any

    @property
    def runtime_dir(self) -> Path:
        return Path("/run/user", str(self.user.pw_uid))

    @property
    def socket(self) -> Path:
        return self.runtime_dir / "podman" / "podman.sock"

    @property
    def docker_host(self) -> str:
        """What the user's kernels get as DOCKER_HOST."""
        return f"unix://{self.socket}"

    def run(self, *argv: str, **kwargs: Any) -> subprocess.CompletedProcess:
        """``argv`` as the user, with the environment of the user's login (``setpriv``), in ``/``
        (the caller's folder may be closed to the user: a hub's is)."""
        return subprocess.run(self.as_user(*argv), capture_output=True, cwd="/", **kwargs)

    def as_user(self, *argv: str) -> list[str]:
        return ["setpriv", f"--reuid={self.user.pw_uid}", f"--regid={self.user.pw_gid}", "--init-groups",
                "--reset-env", "env", f"XDG_RUNTIME_DIR={self.runtime_dir}", *argv]


def engine_of(username: str) -> UserEngine:
    """The engine of Linux user ``username``.

    Raises:
        ConfigError: no such user, or it has no subordinate uids and gids.
    """
    try:
        user = pwd.getpwnam(username)
    except KeyError:
        raise ConfigError(f"There is no Linux user {username!r}.") from None
    for table in ("/etc/subuid", "/etc/subgid"):
        entries = Path(table).read_text().split() if Path(table).exists() else []
        if not any(e.split(":")[0] in (username, str(user.pw_uid)) for e in entries):
            raise ConfigError(f"{username} has no subordinate ids in {table}, which rootless Podman needs. Fix: "
                              f"usermod --add-subuids 100000-165535 --add-subgids 100000-165535 {username} "
                              "(a range no other user has).")
    return UserEngine(user)


def start(username: str, limits: Limits = Limits(), image: str = "sandbox-kernel:latest") -> str:
    """Give ``username`` a running rootless engine with ``image`` (see the module docstring);
    returns its DOCKER_HOST. Idempotent. Blocking; run as root.

    Raises:
        ConfigError: not root, no such user, no subordinate ids, or cgroup v2 (see :func:`limit`).
        BackendUnavailable: podman is missing, or the engine did not answer.
    """
    if os.geteuid() != 0:
        raise ConfigError("Starting an engine for another user needs root.")
    engine = engine_of(username)
    _prepare(engine)
    cgroups = limit(username, limits)
    if not _answers(engine):
        _serve(engine, cgroups)
    copy_image(engine, image)
    return engine.docker_host


def _prepare(engine: UserEngine) -> None:
    """The user's runtime folder (made by root, as pam_systemd does), and, written as the user,
    the overlay storage setting when the user has none."""
    engine.runtime_dir.parent.mkdir(mode=0o755, exist_ok=True)
    if not engine.runtime_dir.is_dir():  # in root's /run/user: nothing of the user's can be in the way
        engine.runtime_dir.mkdir(mode=0o700)
        os.chown(engine.runtime_dir, engine.user.pw_uid, engine.user.pw_gid)
    engine.run("mkdir", "-p", "-m", "0700", str(engine.socket.parent), check=True)  # inside it: as the user
    conf = Path(engine.user.pw_dir, ".config", "containers", "storage.conf")
    engine.run("sh", "-c", 'test -e "$2" || { mkdir -p "$1" && cat > "$2"; }', "sh", str(conf.parent), str(conf),
               input=STORAGE_CONF.encode(), check=True)


def limit(username: str, limits: Limits) -> list[Path]:
    """The user's cgroups (cgroup v1: memory, pids, cpu), made and set to ``limits``; what runs in
    them is bounded together.

    Raises:
        ConfigError: the machine runs cgroup v2, where the engine limits each container itself
            once systemd delegates the controllers (docs/how-to/jupyterhub.md gives that recipe).
    """
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        raise ConfigError("This machine runs cgroup v2: there rootless Podman limits each sandbox itself, with "
                          "systemd's delegation (loginctl enable-linger USER; systemctl --user enable --now "
                          "podman.socket; docs/how-to/jupyterhub.md). This command only sets up cgroup v1 machines.")
    unlimited = -1
    writes = [  # memsw (memory and swap) may never be below the memory limit: lifted first, set last
        ("memory", "memory.memsw.limit_in_bytes", unlimited),
        ("memory", "memory.limit_in_bytes", limits.memory or unlimited),
        ("memory", "memory.memsw.limit_in_bytes", limits.memory or unlimited),
        ("pids", "pids.max", limits.pids or "max"),
        ("cpu", "cpu.cfs_quota_us", int(limits.cpus * 100_000) if limits.cpus else unlimited)]  # of 100 ms periods
    made = []
    for hierarchy, name, value in writes:
        folder = CGROUP_ROOT / hierarchy / CGROUP_NAME / username
        if folder not in made:
            folder.mkdir(parents=True, exist_ok=True)
            made.append(folder)
        if (folder / name).exists():  # memsw only with swap accounting
            (folder / name).write_text(str(value))
    return made


def _answers(engine: UserEngine) -> bool:
    try:
        with engine_errors("ping the user's engine"):
            client = load_docker().DockerClient(base_url=engine.docker_host, timeout=5)
            try:
                return bool(client.ping())
            finally:
                client.close()
    except BackendUnavailable:
        return False


def _serve(engine: UserEngine, cgroups: list[Path]) -> None:
    """Start ``podman system service`` as the user, in ``cgroups`` (it writes itself into them
    first, as root, then becomes the user: everything it starts inherits them)."""
    enter = "; ".join(f"echo $$ > {folder}/cgroup.procs" for folder in cgroups)
    argv = engine.as_user("podman", "system", "service", "--time=0", engine.docker_host)
    STATE_DIR.mkdir(mode=0o755, exist_ok=True)
    log_path = STATE_DIR / f"{engine.user.pw_name}.log"
    with open(log_path, "ab") as log:  # sh, setpriv and env each exec: the pid is podman's
        service = subprocess.Popen(["sh", "-c", f'{enter}; exec "$@"', "sh", *argv], stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd="/")
    (STATE_DIR / f"{engine.user.pw_name}.pid").write_text(str(service.pid))
    deadline = time.monotonic() + READY_S
    while not _answers(engine):
        if service.poll() is not None or time.monotonic() > deadline:
            raise BackendUnavailable(f"The engine of {engine.user.pw_name} did not answer at {engine.docker_host} "
                                     f"within {READY_S:g} s: {log_path.read_text()[-500:].strip()}")
        time.sleep(0.1)


def stop(username: str) -> bool:
    """Stop the engine :func:`start` started for ``username`` (its sandboxes keep running until
    their kernels end); False when none runs. Podman runs the service in a child of the process
    started (inside the user namespace): the whole process group is signalled."""
    pid_file = STATE_DIR / f"{username}.pid"
    try:
        group = int(pid_file.read_text())
    except (OSError, ValueError):
        return False
    running = any(_is_service(proc) for proc in Path("/proc").glob("[0-9]*") if _group_of(proc) == group)
    if running:
        os.killpg(group, 15)
    pid_file.unlink()
    return running


def _group_of(proc: Path) -> int | None:
    """The process group of ``/proc/PID`` (field 5 of its stat), None when it is gone."""
    try:
        return int(proc.joinpath("stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def _is_service(proc: Path) -> bool:
    try:
        return b"podman\0system\0service" in proc.joinpath("cmdline").read_bytes()
    except OSError:
        return False


def copy_image(engine: UserEngine, image: str) -> None:
    """Copy ``image`` from this machine's engine (DOCKER_HOST, else the local socket) into the
    user's, unless the user's has it with the same id. Where this machine's engine cannot give
    it (stopped, or without the image), a user's engine that has an image of that name keeps it
    (said in the log: it may be an older one); one that has none cannot run a sandbox.

    Raises:
        BackendUnavailable: the user's engine lacks the image and this machine's cannot give it
            (the message names the copy and the fix), or ``podman load`` failed.
    """
    have = engine.run("podman", "image", "inspect", "--format", "{{.Id}}", image, text=True)
    held = have.stdout.strip() if have.returncode == 0 else None
    try:
        source, wanted = _machine_image(image)
    except SandboxError as exc:
        if held is None:
            raise BackendUnavailable(f"Could not give {engine.user.pw_name}'s engine the sandbox image {image}, which "
                                     f"is copied from this machine's Docker engine (docs/how-to/jupyterhub.md, section 1): "
                                     f"{exc}") from exc
        _log.warning("%s's engine keeps its image %s (%s), which may be older than the machine's: %s",
                     engine.user.pw_name, image, held[:12], exc)
        return
    if held == wanted:
        return
    load = subprocess.Popen(engine.as_user("podman", "load", "-q"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, cwd="/")
    try:
        with engine_errors(f"copy the image {image}"):
            for chunk in source.api.get_image(image):
                load.stdin.write(chunk)
    except BackendUnavailable:
        if load.poll() is None:  # else podman load ended early (its stdin broke): its message says why
            raise
    finally:
        with contextlib.suppress(BrokenPipeError):
            load.stdin.close()
    if load.wait() != 0:
        raise BackendUnavailable(f"podman load of {image} for {engine.user.pw_name} failed: "
                                 f"{load.stdout.read().decode(errors='replace').strip()}")


def _machine_image(image: str) -> tuple[Any, str]:
    """docker-py's client of this machine's engine and the id of its ``image``.

    Raises:
        BackendUnavailable: the engine does not answer (with its fix), or has no such image."""
    docker = load_docker()
    with engine_errors(f"read the image {image} of this machine's engine"):
        source = docker.from_env(timeout=300)
    try:
        with engine_errors(f"read the image {image} of this machine's engine"):
            return source, source.api.inspect_image(image)["Id"].removeprefix("sha256:")
    except Missing:
        raise BackendUnavailable(f"this machine's Docker engine ({host()}) has no image {image}.",
                                 fix="build it there: `sandbox-kernel image build` (docs/how-to/packages-and-images.md, The default image)") from None


def spawner_hook(limits: Limits = Limits(), image: str = "sandbox-kernel:latest") -> Any:
    """A JupyterHub ``Spawner.pre_spawn_hook`` that starts the user's engine (in a thread: the
    first start copies the image) and gives the user's server its DOCKER_HOST. A failure is shown
    to the user on the hub's page, not only in the hub's log: raised as tornado's ``HTTPError``
    with a ``jupyterhub_message``. JupyterHub (6.1) shows that message on the spawn-pending page
    ("Spawn failed: ...") for a spawn that fails after its first second; one that fails within it
    is answered at once, and there only an ``HTTPError`` passes through
    (``jupyterhub/handlers/pages.py``: any other exception becomes "500: Unhandled error starting
    server", the reason in the hub's log only), as an engine whose start fails at once did."""
    import asyncio

    async def hook(spawner: Any) -> None:
        try:
            address = await asyncio.to_thread(start, spawner.user.name, limits, image)
        except SandboxError as exc:
            from tornado.web import HTTPError  # the hub's (JupyterHub is a tornado app)

            message = f"The engine of your sandboxes could not be prepared. {exc}"
            error = HTTPError(500, "%s", message)
            error.jupyterhub_message = message
            raise error from exc
        spawner.environment = {**spawner.environment, "DOCKER_HOST": address}  # a new dict: the config's is shared
    return hook


# -- the command: sandbox-kernel user-engine start|stop USER -------------------------------------
HELP = "start or stop a Linux user's own rootless Podman engine (as root; for JupyterHub)"


def configure(parser: Any) -> None:
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("username")
    parser.add_argument("--memory", help="memory of all the user's sandboxes together, e.g. 4g (default: no limit)")
    parser.add_argument("--pids", type=int, help="processes and threads of all of them together")
    parser.add_argument("--cpus", type=float, help="CPUs of all of them together")
    parser.add_argument("--image", default="sandbox-kernel:latest", help="image to copy into the user's engine")


def run(args: Any) -> int:
    from ...runtime.traits import parse_bytes

    if args.action == "stop":
        print(f"stopped the engine of {args.username}" if stop(args.username) else f"no engine of {args.username} runs")
        return 0
    limits = Limits(parse_bytes(args.memory) if args.memory else None, args.pids, args.cpus)
    print(f"DOCKER_HOST={start(args.username, limits, args.image)}")
    return 0

"""The Docker engine, as the docker backend uses it: the connection, ownership labels and
leftover removal, file transfer through the archive API, and why a container stopped. Its
errors are mapped in :mod:`.boundary`.

docker-py is imported lazily (:func:`.boundary.load_docker`): importing this module never needs it.
Engine API: https://docs.docker.com/engine/api/v1.41/
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import shutil
import socket
import tarfile
import time
from pathlib import Path
from typing import Any

from ...core.errors import ConfigError, EngineLost, FileTooLarge, Missing, Refused, SandboxError
from ...runtime.owners import owned_here, owner, owner_is_gone
from ...runtime.owners import start_time as _start_time
from ..bounded import write_chunks
from . import podman
from .boundary import engine_errors, load_docker
from .podman import EVENTS_WAIT_S as PODMAN_EVENTS_WAIT_S

LABEL = "org.sandbox-kernel"
OWNER_LABEL = f"{LABEL}.owner"  # "HOST/PID/STARTTIME" of the process that made the container
SESSION_LABEL = f"{LABEL}.session"
CREATED_LABEL = f"{LABEL}.created"  # unix time, seconds
HOSTDIR_LABEL = f"{LABEL}.hostdir"  # the per-session host directory of the ipc sockets
HOSTDIR_ROOT = Path("/tmp")  # the default: short on purpose, unix socket paths must stay under 107 bytes
HOSTDIR_PREFIX = "skd-"  # ROOT/skd-PID-XXXXXXXX
HOSTDIR_VARIABLE = "SANDBOX_KERNEL_HOSTDIR_ROOT"


def hostdir_root() -> Path:
    """The folder of the ipc transport's host directories: ``$SANDBOX_KERNEL_HOSTDIR_ROOT`` when
    set (a test run's own), else ``/tmp``. Read at each call; sweeps look only there. The sockets'
    paths (``ROOT/skd-PID-XXXXXXXX/k-N``) must stay under 107 bytes."""
    return Path(os.environ.get(HOSTDIR_VARIABLE) or HOSTDIR_ROOT)


def connect() -> Any:
    """A ``docker.DockerClient`` for the engine named by the environment (DOCKER_HOST with
    DOCKER_TLS_VERIFY and DOCKER_CERT_PATH, else the current docker context, else the local
    socket), checked with one ping that also gives its API version and says which engine it is
    (:func:`_client_class`); a TLS engine's own CA is kept. Blocking: run it in a thread.

    Raises:
        BackendUnavailable: docker-py is missing, or no engine answers.
    """
    with engine_errors("connect"):
        return _client_class().from_env(timeout=30)


@functools.cache
def _client_class() -> type:
    """``docker.DockerClient`` with two changes to docker-py 7's.

    - The engine's CA (``DOCKER_CERT_PATH/ca.pem``) wins over REQUESTS_CA_BUNDLE and
      CURL_CA_BUNDLE. requests lets these variables replace a session's own ``verify`` at each
      request (psf/requests#3829), so where they are set (for a proxy's CA) a TLS engine with its
      own CA fails with "certificate verify failed". Only ``verify`` changes: proxies and
      everything else still come from the environment. The fix is in place before the
      constructor's first request, the API version probe.
    - That probe is ``GET /_ping``, whose ``Api-Version`` header is the engine's API version (as
      the Docker CLI negotiates it; Engine API, "Ping"), not docker-py's ``GET /version``. The
      answer's headers are kept (``client.api.ping_headers``): Podman's carry
      ``Libpod-Api-Version`` (its API reference, SystemPing), so nothing else need be asked to
      tell the engines apart. Podman 4.3 runs dpkg-query for the package of each of its helpers
      at every ``/version`` and ``/info``: measured here, these were about half the CPU of a
      Podman sandbox's whole life (2.3 s), and 0.3 s of its start each. An engine whose ping has
      no ``Api-Version`` is asked ``/version``, as docker-py does."""
    docker = load_docker()

    class APIClient(docker.APIClient):
        ping_headers = None

        def merge_environment_settings(self, url, proxies, stream, verify, cert):  # requests.Session's
            if verify is None and self.verify is not True:  # docker-py set a CA path, or False (no TLS check)
                verify = self.verify
            return super().merge_environment_settings(url, proxies, stream, verify, cert)

        def _retrieve_server_version(self):  # docker-py 7's constructor calls it for version "auto"
            try:
                response = self._get(self._url("/_ping", versioned_api=False))
                self._raise_for_status(response)
            except Exception as exc:  # as docker-py's own probe words it
                raise docker.errors.DockerException(f"Error while fetching server API version: {exc}") from exc
            self.ping_headers = response.headers
            return response.headers.get("Api-Version") or super()._retrieve_server_version()

    class DockerClient(docker.DockerClient):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.api = APIClient(*args, **kwargs)  # all docker.DockerClient.__init__ does (docker-py 7)

    return DockerClient


def _over_local_socket(client: Any) -> bool:
    """Whether docker-py reaches the engine over a unix socket of this machine (not tcp, ssh or
    a Windows named pipe)."""
    return client.api.base_url.startswith("http+docker://localhost")


def engine_info(client: Any) -> dict[str, Any]:
    """The engine's description (``GET /info``), asked once per backend: :func:`engine_is_here`
    and :func:`.rootless.is_rootless` read it. Blocking.

    Raises:
        BackendUnavailable: the engine stopped answering.
    """
    with engine_errors("read the engine's description"):
        return client.info()


def engine_is_here(client: Any, info: dict[str, Any]) -> bool:
    """Whether the engine runs on this machine and shares its filesystem: reached over a unix
    socket of this machine, its ``info["Name"]`` (the engine host's hostname; ``info``:
    :func:`engine_info`) is ours, and it is not Docker Desktop (whose engine runs in a VM, even
    on Linux). Then host paths (the ipc transport's directory, ``mounts``) mean the same to it
    as to us."""
    if not _over_local_socket(client):
        return False
    return info.get("Name") == socket.gethostname() and "docker desktop" not in str(info.get("OperatingSystem", "")).lower()


def choose_transport(client: Any, requested: str, here: bool) -> str:
    """The transport for ``requested`` ("auto", "ipc" or "api") on an engine that is ``here``
    (:func:`engine_is_here`) or not: "auto" is "ipc" only where it is known to work.

    Raises:
        ConfigError: "ipc" was asked for an engine reached over tcp, ssh or a pipe.
    """
    if requested == "ipc" and not _over_local_socket(client):
        raise ConfigError(f"transport=ipc needs an engine on this machine, reached over its unix socket; this one "
                          f"is {os.environ.get('DOCKER_HOST') or client.api.base_url}. Fix: --DockerBackend.transport=api "
                          "(or auto).")
    if requested != "auto":
        return requested
    return "ipc" if here else "api"


# -- ownership: labels, and leftovers of owners that are gone ---------------------------------
def labels(session: str, hostdir: Path | None) -> dict[str, str]:
    """The labels of a session's container and volume (``hostdir``: the ipc transport's)."""
    made = {OWNER_LABEL: owner(), SESSION_LABEL: session, CREATED_LABEL: str(int(time.time()))}
    return {**made, HOSTDIR_LABEL: str(hostdir)} if hostdir is not None else made


def remove_hostdir(path: str | Path | None) -> None:
    """Delete a session's host directory; refuses anything that is not ``ROOT/skd-*``
    (:func:`hostdir_root`)."""
    if path and Path(path).parent == hostdir_root() and Path(path).name.startswith(HOSTDIR_PREFIX):
        shutil.rmtree(path, ignore_errors=True)


def remove_leftovers(client: Any, everything: bool = False, dry_run: bool = False) -> list[str]:
    """Remove the containers and volumes of owners that are gone (a kernel that crashed or was
    killed), their host directories, and host directories of gone processes. Blocking.
    Workspace volumes (``workdir_volume``) have no owner label and are never touched.

    Args:
        client: a docker-py client.
        everything: remove every sandbox-kernel container and volume of this host, live
            owners' too (another host's, on a shared engine, are never touched), with their host
            directories; a live process's host directory without a container on this engine (its
            sandbox runs on another engine) is kept.
        dry_run: remove nothing; only return what would be removed.

    Returns:
        The names of the removed containers and volumes.
    """
    removed = []
    with engine_errors("list sandbox containers"):
        for info in client.api.containers(all=True, filters={"label": OWNER_LABEL}):
            info_labels = info.get("Labels") or {}
            label = info_labels.get(OWNER_LABEL, "")
            if not (everything and owned_here(label) or owner_is_gone(label)):
                continue
            if dry_run:
                removed.append(info["Names"][0].lstrip("/"))
            else:
                with contextlib.suppress(Refused), engine_errors("remove a container"):  # gone, or being removed
                    client.api.remove_container(info["Id"], force=True)
                    removed.append(info["Names"][0].lstrip("/"))
                remove_hostdir(info_labels.get(HOSTDIR_LABEL))
        for volume in client.api.volumes(filters={"label": OWNER_LABEL}).get("Volumes") or []:
            label = (volume.get("Labels") or {}).get(OWNER_LABEL, "")
            if not (everything and owned_here(label) or owner_is_gone(label)):
                continue
            if dry_run:
                removed.append(volume["Name"])
            else:
                with contextlib.suppress(Refused), engine_errors("remove a volume"):  # in use, or being removed
                    client.api.remove_volume(volume["Name"], force=True)
                    removed.append(volume["Name"])
    for path in [] if dry_run else hostdir_root().glob(f"{HOSTDIR_PREFIX}*"):
        pid = path.name.removeprefix(HOSTDIR_PREFIX).split("-")[0]
        if pid.isdigit() and _start_time(int(pid)) is None:  # a live one's goes with its container, above
            remove_hostdir(path)
    return removed


# -- files: the engine's archive API -------------------------------------------------------------
def put_file(container: Any, local: Path, directory: str, relative: str, uid: int, gid: int) -> None:
    """Copy the host file ``local`` to ``directory/relative`` in the container, creating the
    missing parent directories, all owned by ``uid:gid``. ``directory`` must be a volume when
    the root filesystem is read-only (the archive API writes volumes, not tmpfs). Blocking.

    Raises:
        FileNotFoundError: ``local`` does not exist.
        SandboxError: the engine refused.
    """
    data = Path(local).read_bytes()
    buffer = io.BytesIO()
    now = int(time.time())
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        parts = relative.split("/")
        for depth in range(1, len(parts)):
            folder = tarfile.TarInfo("/".join(parts[:depth]))
            folder.type, folder.mode, folder.uid, folder.gid, folder.mtime = tarfile.DIRTYPE, 0o755, uid, gid, now
            tar.addfile(folder)
        info = tarfile.TarInfo(relative)
        info.size, info.mode, info.uid, info.gid, info.mtime = len(data), 0o644, uid, gid, now
        tar.addfile(info, io.BytesIO(data))
    with engine_errors(f"copy {local} into the sandbox"):
        if not container.put_archive(directory, buffer.getvalue()):
            raise SandboxError(f"The Docker engine did not accept {relative}.")


def put_tree(container: Any, archive: Path, directory: str) -> None:
    """Unpack the tar file ``archive`` (a workspace copy: owners and modes as it gives them) into
    ``directory`` in the container, streamed from disk. Blocking.

    Raises:
        SandboxError: the engine refused.
    """
    with open(archive, "rb") as data, engine_errors(f"copy the workspace into {directory} in the sandbox"):
        if not container.put_archive(directory, data):
            raise SandboxError(f"The Docker engine did not take the workspace copy into {directory}.")


class _Chunks(io.RawIOBase):
    """A readable file over an iterator of byte chunks (the engine's archive stream)."""

    def __init__(self, chunks: Any) -> None:
        self._chunks, self._rest = iter(chunks), b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._rest:
            self._rest = next(self._chunks, None)
            if self._rest is None:
                self._rest = b""
                return 0
        n = min(len(buffer), len(self._rest))
        buffer[:n], self._rest = self._rest[:n], self._rest[n:]
        return n


def get_file(container: Any, remote: str, local: Path, max_bytes: int = 0) -> Path:
    """Copy the regular file at the absolute path ``remote`` in the container to ``local``,
    streamed: at most ``max_bytes`` bytes (0: no bound; the engine's own size of the file is
    checked before anything is read, and the bytes as they come). Blocking.

    Raises:
        FileNotFoundError: ``remote`` does not exist, or is not a regular file.
        FileTooLarge: it is larger than ``max_bytes``.
    """
    try:
        with engine_errors(f"copy {remote} out of the sandbox"):
            chunks, info = container.get_archive(remote, chunk_size=1024 * 1024)
    except Missing:
        raise FileNotFoundError(f"{remote} does not exist in the sandbox") from None
    if max_bytes and int((info or {}).get("size") or 0) > max_bytes:
        raise FileTooLarge(remote, max_bytes)
    with engine_errors(f"copy {remote} out of the sandbox"), \
            tarfile.open(fileobj=io.BufferedReader(_Chunks(chunks), 1024 * 1024), mode="r|") as tar:
        member = tar.next()
        if member is None or not member.isfile():
            raise FileNotFoundError(f"{remote} is not a regular file in the sandbox")
        source = tar.extractfile(member)
        return write_chunks(iter(lambda: source.read(1024 * 1024), b""), local, max_bytes, remote)


def pids_file(container_id: str) -> Path | None:
    """The container's ``pids.current`` cgroup file on this host (cgroup v1 or v2, cgroupfs or
    systemd driver; Docker or Podman), or None when it is not found: a cheap way to see a fork bomb's count."""
    for pattern in ("pids/docker/{}", "pids/system.slice/docker-{}.scope", "system.slice/docker-{}.scope",
                    "docker/{}", "pids/libpod_parent/libpod-{}", "machine.slice/libpod-{}.scope"):  # last two: Podman
        path = Path("/sys/fs/cgroup") / pattern.format(container_id) / "pids.current"
        if path.exists():
            return path
    return None


# -- death: learned from the engine ----------------------------------------------------------------
WAIT_CHUNK_S = 300  # the wait long-poll is renewed this often; a dead engine is noticed at once


def wait_for_exit(client: Any, container_id: str) -> None:
    """Block until the container stops (``POST /containers/{id}/wait``; on Podman its own wait
    endpoint, :func:`.podman.wait`). Blocking.

    Raises:
        EngineLost: the engine stopped answering (the connection broke and a ping fails).
    """
    libpod = podman.libpod_version(client)
    while True:
        try:
            with engine_errors("wait for the sandbox container"):
                if libpod:
                    podman.wait(client, container_id, libpod, timeout=WAIT_CHUNK_S)
                else:
                    client.api.wait(container_id, timeout=WAIT_CHUNK_S)
            return
        except Missing:
            return
        except SandboxError as exc:
            try:  # the long poll timed out, or the engine went away?
                with engine_errors("ping"):
                    client.ping()
            except SandboxError:
                raise EngineLost("the Docker engine stopped answering") from exc


def _outside_signals(client: Any, container_id: str, since: int, podman: bool = False) -> list[str]:
    """Signals sent to the container through the engine (``kill`` events: docker kill, stop,
    rm -f) since ``since`` (unix time); "" for one the engine does not name (Podman)."""
    until = time.time() + (PODMAN_EVENTS_WAIT_S if podman else 0)
    events = client.api.events(since=since, until=f"{until:.6f}", decode=True,
                               filters={"container": container_id, "event": "kill"})
    return [event.get("Actor", {}).get("Attributes", {}).get("signal", "") for event in events]


def _extend_hint(image: str) -> str:
    return (f"or build the default recipe on top of it: `sandbox-kernel image build --base {image} --tag "
            "sandbox-kernel:custom` (needs python3 3.11 with venv), then --DockerBackend.image=sandbox-kernel:custom")


def no_ipykernel(image: str) -> str:
    """The reason and fix for an image whose python lacks ipykernel."""
    return f"the image {image!r} has no ipykernel. Fix: add it (`RUN pip install ipykernel` in its Dockerfile), " + \
        _extend_hint(image)


def no_python(image: str) -> str:
    """The reason and fix for an image without ``python`` on its PATH."""
    return f"the image {image!r} has no `python` on its PATH, so it cannot run the kernel. Fix: use an image with " \
        "python and ipykernel, " + _extend_hint(image)


def death_reason(client: Any, container_id: str, *, memory_limit: int, image: str, created: int,
                 starting: bool, runtime: str = "", pids_limit: int = 0, podman: bool = False) -> str:
    """Why the stopped container stopped, as a phrase for :class:`SandboxDied`, from its state
    (``State.OOMKilled``, ``State.ExitCode``), the engine's ``kill`` events and, for a kernel
    that never became ready, the container's log. Under gVisor, exit code 2 is runsc's own
    fatal error (Go), seen when the container's pids cgroup, which counts runsc's host threads,
    is full. Podman (``podman``) reports no OOM kill: a SIGKILL nobody sent under a memory limit
    is said to be most likely one. Blocking; never raises."""
    try:
        with engine_errors("inspect the stopped container"):
            return _reason(client, container_id, memory_limit=memory_limit, image=image, created=created,
                           starting=starting, runtime=runtime, pids_limit=pids_limit, podman=podman)
    except Missing:
        return "its container was removed from outside the notebook (docker rm)"
    except Exception:  # the engine went away while we asked (mapped), or answered nonsense
        return "the Docker engine stopped answering"


OOM_SETTLE_TRIES, OOM_SETTLE_S = 20, 0.1
"""How long :func:`death_reason` looks again for ``OOMKilled`` after a SIGKILL under a memory
limit (20 × 0.1 s): the engine sets it from an event that can come after the exit. 0.5 s was
too short under gVisor on a machine at 97 % CPU (a full test run at 3 workers): the memory bomb
was said to be "killed by SIGKILL". Only a SIGKILL under a memory limit without the flag waits."""


def _reason(client: Any, container_id: str, *, memory_limit: int, image: str, created: int, starting: bool,
            runtime: str, pids_limit: int, podman: bool) -> str:
    """:func:`death_reason`, with the engine's errors unmapped."""
    import signal

    from ...runtime.traits import format_bytes

    state = client.api.inspect_container(container_id)["State"]
    for _ in range(OOM_SETTLE_TRIES):  # a SIGKILL under a memory limit: the engine may learn of the
        if state.get("OOMKilled") or state.get("ExitCode") != 137 or not memory_limit or podman:  # OOM after
            break  # the exit (containerd's oom event, late on a busy machine, seen on an engine in a container)
        time.sleep(OOM_SETTLE_S)
        state = client.api.inspect_container(container_id)["State"]
    if state.get("OOMKilled"):
        return "it ran out of memory" + (f" (limit {format_bytes(memory_limit)})" if memory_limit else "")
    if signals := _outside_signals(client, container_id, created, podman):
        sig = signals[0]
        name = signal.Signals(int(sig)).name if sig.isdigit() and int(sig) in signal.Signals._value2member_map_ else sig
        how = "podman kill, stop or rm" if podman else "docker kill, stop or rm"
        return f"its container was stopped from outside the notebook ({name + ': ' if name else ''}{how})"
    code = state.get("ExitCode", -1)
    if podman and code == 128 + signal.SIGKILL and memory_limit:
        return (f"its kernel was killed by SIGKILL, most likely for running out of memory (limit "
                f"{format_bytes(memory_limit)}; Podman does not report out-of-memory kills)")
    if code == 2 and runtime == "runsc" and pids_limit:
        return (f"gVisor (runsc) stopped it: runsc could not start another host thread, which happens when the "
                f"sandbox's processes reach pids_limit ({pids_limit}; under runsc it counts runsc's own threads)")
    if starting:
        log = client.api.logs(container_id, tail=5).decode("utf-8", "replace").strip()
        if re.search(r"No module named '?(ipykernel|zmq)", log):  # zmq: the api relay's, ipykernel needs it
            return no_ipykernel(image)
        if code == 127 or "exec python failed" in log:
            return no_python(image)
        if log:
            return f"its kernel exited with code {code}: {log.splitlines()[-1]}"
    if code > 128 and code - 128 in signal.Signals._value2member_map_:
        return f"its kernel was killed by {signal.Signals(code - 128).name}"
    return f"its kernel exited with code {code}"

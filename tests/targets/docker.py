"""The docker backend against the real engine (``.ci/docker-setup.sh`` provides it in CI), and
helpers of its tests: what this host holds of a sandbox owner, a Docker socket proxy that can
be cut (the engine "gone" without stopping the real one), an event recorder."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

from sandbox_kernel.backends.docker import engine

from . import Prepared, Target

IMAGE = "sandbox-kernel:latest"
ROOT = Path(__file__).resolve().parents[2]


def unavailable() -> str | None:
    try:
        import docker
    except ImportError:
        return "docker-py is not installed (pip install 'sandbox-kernel[docker]')"
    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:  # any failure to reach the engine
        return f"no Docker engine answers ({type(exc).__name__}); run `bash .ci/docker-setup.sh` as root"
    return missing_image(client, IMAGE, "docker-setup.sh")


def missing_image(client, image: str, setup: str) -> str | None:
    """Why ``image`` cannot be used (it is not on the engine; ``.ci/SETUP`` makes it), or None.
    Closes ``client``."""
    import docker

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        return f"the image {image} is missing; run `bash .ci/{setup}` as root"
    finally:
        client.close()
    return None


@contextlib.contextmanager
def prepare() -> Iterator[Prepared]:
    """Automatic image builds in tests use the CI's offline inputs when they are there."""
    traits = {}
    if (ROOT / "build" / "wheelhouse").is_dir():
        traits.update(build_base="sandbox-kernel-base:bookworm", build_wheelhouse=str(ROOT / "build" / "wheelhouse"))
    yield Prepared(traits=traits)
    try:  # sandboxes of kernels the tests killed (e.g. shutdown_kernel(now=True)) go with the session
        import docker

        engine.remove_leftovers(docker.from_env(timeout=10))
    except Exception:
        pass


TARGET = Target("docker", unavailable=unavailable, prepare=prepare)


def held_by(client, pid: int, host: str | None = None) -> dict[str, list[str]]:
    """The containers, volumes and host directories whose owner is process ``pid`` of this host
    (or of ``host``: a command run :func:`as_host`)."""
    prefix = f"{host or socket.gethostname()}/{pid}/"
    label = engine.OWNER_LABEL
    containers = [c["Names"][0] for c in client.api.containers(all=True, filters={"label": label})
                  if c["Labels"][label].startswith(prefix)]
    volumes = [v["Name"] for v in client.api.volumes(filters={"label": label}).get("Volumes") or []
               if v["Labels"][label].startswith(prefix)]
    dirs = [str(p) for p in engine.hostdir_root().glob(f"{engine.HOSTDIR_PREFIX}{pid}-*")]
    return {"containers": containers, "volumes": volumes, "hostdirs": dirs}


NOTHING = {"containers": [], "volumes": [], "hostdirs": []}


def engine_requests(monkeypatch) -> list[str]:
    """A list that gets the path of every request docker-py sends from now on in this process
    (``/_ping``, ``/info``, ``/containers/create`` ...: the API version's prefix left out), in
    order. requests' ``Session.send`` is wrapped: each request still goes to the engine."""
    import requests

    paths, send = [], requests.Session.send

    def recorded(session, request, **kwargs):
        paths.append(re.sub(r"^/v[0-9.]+/", "/", request.path_url.split("?")[0]))
        return send(session, request, **kwargs)

    monkeypatch.setattr(requests.Session, "send", recorded)
    return paths


def as_host(name: str) -> list[str]:
    """The start of an argv that runs a command as if on another host named ``name`` of an engine
    shared with this one: in a UTS namespace of its own (``unshare --uts``, util-linux; in a user
    namespace too when not root), with that hostname. Its sandboxes' owner labels name ``name``, so
    the leftovers it makes and the ``gc`` (``--all`` too) it runs are its own: the sweeps of every
    other test on this machine leave them alone (another host's), and it removes none of theirs.
    The same engine, the same processes: only the name differs."""
    userns = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    return ["unshare", "--uts", *userns, "sh", "-c", 'hostname "$0" && exec "$@"', name]


class SocketProxy:
    """A unix socket at ``path`` that forwards to the engine's socket until :meth:`cut`, which
    closes it and every connection through it: to a client, the engine is gone."""

    def __init__(self, path: Path, target: str = "/var/run/docker.sock") -> None:
        self.path, self.target = path, target
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        self.server.listen(64)
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.target)
            self.open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def cut(self) -> None:
        self.server.close()
        os.unlink(self.path)
        for sock in self.open:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

"""The docker backend on an engine that does not share this host's filesystem, reached as
``DOCKER_HOST=tcp://127.0.0.1:PORT`` with TLS (``DOCKER_TLS_VERIFY``, ``DOCKER_CERT_PATH``): the
rig of :mod:`.remote_engine`, with the engine-API transport (a bind mount there names the rig's
paths, so ipc sockets in a host folder cannot work)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from . import Prepared, Target, remote_engine


@contextlib.contextmanager
def prepare() -> Iterator[Prepared]:
    yield Prepared(traits={"transport": "api"}, kernel_env=remote_engine.session_rig().tcp_env,
                   kernel_options=["--DockerBackend.transport=api"])


TARGET = Target("docker_tcp", backend="docker", unavailable=remote_engine.unavailable, prepare=prepare)

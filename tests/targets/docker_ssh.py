"""The docker backend on the rig of :mod:`.remote_engine` reached as ``DOCKER_HOST=ssh://root@
127.0.0.1:PORT`` (docker-py's paramiko transport runs ``docker system dial-stdio`` in the rig;
``HOME`` names a folder with the key, ``known_hosts`` and ``config``), with the engine-API transport."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from . import Prepared, Target, remote_engine


@contextlib.contextmanager
def prepare() -> Iterator[Prepared]:
    yield Prepared(traits={"transport": "api"}, kernel_env=remote_engine.session_rig().ssh_env,
                   kernel_options=["--DockerBackend.transport=api"])


TARGET = Target("docker_ssh", backend="docker", unavailable=lambda: remote_engine.unavailable(ssh=True),
                prepare=prepare)

"""The docker backend on its engine-API transport (the kernel's channels over the container's
attach stream, see sandbox_kernel/backends/docker/bridge.py) against the local engine: the
same engine and image as ``docker``, with ``transport=api`` instead of ``auto`` (ipc here)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from . import Prepared, Target
from . import docker as local_engine


@contextlib.contextmanager
def prepare() -> Iterator[Prepared]:
    with local_engine.prepare() as prepared:
        yield Prepared(traits={**prepared.traits, "transport": "api"}, kernel_env=dict(prepared.kernel_env),
                       kernel_options=[*prepared.kernel_options, "--DockerBackend.transport=api"])


TARGET = Target("docker_api", backend="docker", unavailable=local_engine.unavailable, prepare=prepare)

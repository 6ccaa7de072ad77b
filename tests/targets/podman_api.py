"""The docker backend on its engine-API transport (the attach stream) against Podman's
Docker-compatible API: the service of ``podman`` (tests/targets/podman.py), ``transport=api``
instead of ``auto`` (ipc there: rootful podman on this host)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from . import Prepared, Target, podman


@contextlib.contextmanager
def prepare() -> Iterator[Prepared]:
    from tests.support.backends import prepared

    service = prepared("podman")  # one service for both targets
    yield Prepared(traits={**service.traits, "transport": "api"}, kernel_env=dict(service.kernel_env),
                   kernel_options=[*service.kernel_options, "--DockerBackend.transport=api"])


TARGET = Target("podman_api", backend="docker", unavailable=podman.unavailable, prepare=prepare)

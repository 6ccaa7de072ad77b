"""Backends as the tests make them: each backend's session-wide set-up on this machine
(:func:`prepared`, which skips or, in CI, fails when it cannot run; the session's targets are
held by the test plugin, tests/plugin/targets.py) and unstarted backends configured for it
(:func:`backends`)."""

from __future__ import annotations

import contextlib

from tests import targets
from tests.plugin.targets import session_targets


def prepared(name: str) -> targets.Prepared:
    """The session-wide set-up of backend ``name`` (skips or fails when it cannot run)."""
    return session_targets().prepared(name)


@contextlib.asynccontextmanager
async def backends(name: str):
    """Yields ``make(**traits)`` → an unstarted backend ``name``, configured for this machine;
    every backend made is shut down when the block ends."""
    from sandbox_kernel.backends import get_backend_class

    made = []

    def make(**traits):
        backend = get_backend_class(targets.backend_of(name))(**{**prepared(name).traits, **traits})
        made.append(backend)
        return backend

    with targets.env_vars(prepared(name).kernel_env):  # also when the backend connects (docker: DOCKER_HOST)
        try:
            yield make
        finally:
            for backend in made:
                await backend.shutdown()

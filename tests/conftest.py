"""Fixtures shared by the suite: backends by name, kernels started from installed kernelspecs."""

from __future__ import annotations

import contextlib
import pytest

from tests import targets
from tests.targets import NAMES, skip_or_fail

_prepared: dict[str, targets.Prepared] = {}
_stack = contextlib.ExitStack()


def prepared(name: str) -> targets.Prepared:
    """The session-wide set-up of backend ``name`` (skips or fails when it cannot run)."""
    target = targets.get(name)
    if (reason := target.unavailable()) is not None:
        skip_or_fail(f"{name} backend unavailable: {reason}")
    if name not in _prepared:
        _prepared[name] = _stack.enter_context(target.prepare())
    return _prepared[name]


def pytest_sessionfinish(session, exitstatus):
    _stack.close()


@pytest.fixture(params=NAMES)
def backend_name(request) -> str:
    """Each backend's name in turn; a test using it runs once per backend."""
    prepared(request.param)
    return request.param


@contextlib.asynccontextmanager
async def backends(name: str):
    """Yields ``make(**traits)`` → an unstarted backend ``name``, configured for this machine;
    every backend made is shut down when the block ends."""
    from sandbox_kernel.backends import get_backend_class

    made = []

    def make(**traits):
        with targets.env_vars(prepared(name).kernel_env):
            backend = get_backend_class(name)(**{**prepared(name).traits, **traits})
        made.append(backend)
        return backend

    try:
        yield make
    finally:
        for backend in made:
            await backend.shutdown()


@pytest.fixture
async def make_backend(backend_name):
    """``make_backend(**traits)`` → an unstarted backend of the current kind (see :func:`backends`)."""
    async with backends(backend_name) as make:
        yield make


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """nbval cells of a notebook whose kernel is ``sandbox-NAME``: make sure backend NAME can
    run here (skip, or fail in CI) and give the kernel nbval starts the backend's test
    environment (e.g. the local E2B server's address)."""
    notebook = getattr(item.parent, "nb", None)
    if notebook is None:
        return
    kernel_name = notebook.metadata.get("kernelspec", {}).get("name", "")
    if kernel_name.startswith("sandbox-") and kernel_name[len("sandbox-"):] in NAMES:
        import os

        os.environ.update(prepared(kernel_name[len("sandbox-"):]).kernel_env)

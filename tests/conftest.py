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


TIERS = ("unit", "kernel", "docker", "e2b", "gateway", "browser")
"""Markers of the test tiers (pyproject.toml describes them); ``pytest -m unit`` is the fast one."""

BACKEND_TIERS = {"local": "kernel", "docker": "docker", "e2b": "e2b", "gateway": "gateway"}
"""The tier of a test case parametrized with a backend's name."""

BACKEND_PARAMS = ("backend_name", "name", "kind")
"""Parameter names whose value is a backend's name."""

UNIT_MODULES = {"test_capabilities", "test_compat", "test_config_check", "test_docker_spec", "test_paths", "test_pipeline",
                "test_policy", "test_cli"}
"""Modules whose every test runs in process, with no kernel: all ``unit`` unless marked."""


def pytest_collection_modifyitems(config, items):
    """Give every test its tier marker: a case parametrized with a backend's name gets that
    backend's tier (so ``-m "not docker"`` leaves out the docker case of a contract test); a
    test with no tier marker gets ``unit`` in :data:`UNIT_MODULES`, else ``kernel``."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        for key in BACKEND_PARAMS:
            if params.get(key) in BACKEND_TIERS:
                item.add_marker(BACKEND_TIERS[params[key]])
        if not any(item.get_closest_marker(tier) for tier in TIERS):
            item.add_marker("unit" if item.module.__name__.rpartition(".")[2] in UNIT_MODULES else "kernel")


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

"""Fixtures shared by the suite: backends by name, kernels started from installed kernelspecs."""

from __future__ import annotations

import pytest

from tests.support.backends import backends, close, prepared  # noqa: F401 - also imported from here
from tests.targets import NAMES

TIERS = ("unit", "corpus", "kernel", "docker", "e2b", "gateway", "browser")
"""Markers of the test tiers (pyproject.toml describes them); ``pytest -m unit`` is the fast one."""

BACKEND_TIERS = {"local": "kernel", "docker": "docker", "docker_api": "docker", "podman": "docker",
                 "podman_api": "docker", "e2b": "e2b", "gateway": "gateway", "docker_tcp": "docker", "docker_ssh": "docker"}
"""The tier of a test case parametrized with a backend's name."""

BACKEND_PARAMS = ("backend_name", "name", "kind")
"""Parameter names whose value is a backend's name."""



def pytest_collection_modifyitems(config, items):
    """A case parametrized with a backend's name also gets that backend's tier (so ``-m "not
    docker"`` leaves out the docker case of a contract test). Every other test has the tier its
    module declares (``pytestmark``) or its own marker; a test with none is a collection error."""
    untiered = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        notebook = getattr(item.parent, "nb", None)  # an nbval cell: its notebook's kernel says
        if notebook is not None:
            params = {"name": notebook.metadata.get("kernelspec", {}).get("name", "").removeprefix("sandbox-")}
        for key in BACKEND_PARAMS:
            if params.get(key) in BACKEND_TIERS:
                item.add_marker(BACKEND_TIERS[params[key]])
        if notebook is not None and not any(item.get_closest_marker(tier) for tier in TIERS):
            item.add_marker("kernel")  # a notebook on python3: nbval starts a kernel
        if not any(item.get_closest_marker(tier) for tier in TIERS):
            untiered.append(item.nodeid)
    if untiered:
        raise pytest.UsageError(f"{len(untiered)} test(s) have no tier marker ({', '.join(TIERS)}): declare it "
                                f"with `pytestmark = pytest.mark.TIER` in the module, e.g. {untiered[0]}")


def pytest_sessionfinish(session, exitstatus):
    close()


@pytest.fixture(params=NAMES)
def backend_name(request) -> str:
    """Each backend's name in turn; a test using it runs once per backend."""
    prepared(request.param)
    return request.param


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

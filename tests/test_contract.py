"""The backend contract (tests/support/contract.py), run against every backend: ``backend_name``
is parametrized over them (``CONTRACT_NAMES``: the plugin's backends, and the docker backend on
Podman's API). The cases that only read share one started sandbox per backend (the plugin's
``sandbox``, as ipykernel's tests share ``kernel()``); the others make their own. All run on the
module's event loop, where the shared sandbox lives."""

import pytest
import pytest_asyncio

from tests.support.backends import backends, prepared
from tests.support.contract import *  # noqa: F403 - its test_* functions are collected here
from tests.support.contract_jupyter import *  # noqa: F403 - likewise
from tests.targets import CONTRACT_NAMES

pytestmark = [pytest.mark.kernel, pytest.mark.asyncio(loop_scope="module")]


@pytest.fixture(scope="module", params=CONTRACT_NAMES)
def backend_name(request) -> str:
    """Each backend's name in turn, ``podman`` too; a test using it runs once per backend."""
    prepared(request.param)
    return request.param


@pytest_asyncio.fixture(loop_scope="module")
async def make_backend(backend_name):
    """``make_backend(**traits)`` → unstarted backends of this test's own (on the module's loop)."""
    async with backends(backend_name) as make:
        yield make

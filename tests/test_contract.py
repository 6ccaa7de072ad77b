"""The backend contract (tests/support/contract.py), run against every backend: ``backend_name``
is parametrized over them (``CONTRACT_NAMES``: tests/conftest.py's backends, and the docker
backend on Podman's API)."""

import pytest

from tests.support.backends import prepared
from tests.support.contract import *  # noqa: F403 - its test_* functions are collected here
from tests.support.contract_jupyter import *  # noqa: F403 - likewise
from tests.targets import CONTRACT_NAMES

pytestmark = pytest.mark.kernel


@pytest.fixture(params=CONTRACT_NAMES)
def backend_name(request) -> str:
    """Each backend's name in turn, ``podman`` too; a test using it runs once per backend."""
    prepared(request.param)
    return request.param

"""The backend contract (tests/support/contract.py), run against every backend: ``backend_name``
is parametrized over them (tests/conftest.py)."""

from tests.support.contract import *  # noqa: F403 - its test_* functions are collected here

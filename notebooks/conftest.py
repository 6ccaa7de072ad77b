"""nbval's notebook items live here, outside ``tests/``, so ``tests/conftest.py``'s per-item hook
(which gives a ``sandbox-NAME`` notebook's kernel the backend's test environment, e.g. the local
E2B server's address) must be made visible to them: conftest hooks apply to their own directory."""

from tests.conftest import pytest_runtest_setup  # noqa: F401

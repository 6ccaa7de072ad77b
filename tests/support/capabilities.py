"""What a backend declares it cannot do: tests of such a capability assert its documented
fallback instead (never a silent skip); and how a backend shows a str result."""

from __future__ import annotations

from sandbox_kernel.backends import get_backend_class
from tests.targets import backend_of


def lacks(backend_name: str, capability: str) -> bool:
    """True when ``backend_name`` declares it cannot do ``capability`` (a field of its
    ``capabilities``). A test taking the fallback path for it then fails if the backend can
    after all, and a test taking the normal path fails if it cannot, so the declaration and
    the behaviour must match; tests/test_capabilities.py pins each built-in declaration."""
    return not getattr(get_backend_class(backend_of(backend_name)).capabilities, capability)


def shown(value: str, backend_name: str) -> str:
    """The text/plain a backend shows for the str result ``value``: its repr, except on e2b,
    whose server strips the quotes (e2b-dev/code-interpreter ``api/models/result.py``)."""
    return value if backend_name == "e2b" else repr(value)

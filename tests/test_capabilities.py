"""The backend contract as declared: an abstract base, and each built-in backend's capabilities
(what tests/test_contract.py then checks against each backend's behaviour)."""

from __future__ import annotations

import pytest

from sandbox_kernel.backends import backend_names, get_backend_class
from sandbox_kernel.backends.base import Backend, Capabilities
from sandbox_kernel.core.errors import NotSupported
from sandbox_kernel.frontdoors.api import AsyncSandbox

pytestmark = pytest.mark.unit

KERNEL = ["completion", "inspection", "stdin", "comms", "display_updates"]

JUPYTER = ["payloads", "history", "subshells", "debugger"]
"""What a backend running a real Jupyter kernel relays besides cells (issue 28): the execute_reply
whole, history_request, kernel subshells (JEP 91), the debugger."""

DECLARED = {
    # docs/how-to/checkpoints.md: a keeper process in the sandbox holds forks of its kernel
    "local": [*KERNEL, "files", "pool", *JUPYTER, "checkpoints"],
    # docs/explanation/security.md, "Egress": docker changes a running sandbox's proxy, e2b calls update_network
    "docker": [*KERNEL, "files", "pool", *JUPYTER, "egress_update", "checkpoints"],
    "gateway": [*KERNEL, "files", "reattach", *JUPYTER],
    # docs/how-to/e2b.md: E2B's /execute has no stdin, completion or inspection, and drops display ids
    # and comms; sandboxes can be paused and attached to by id (and it returns no payloads, takes
    # no silent nor user_expressions, has no history, subshells or debugger: docs/how-to/e2b.md's table).
    "e2b": ["files", "pause", "reattach", "egress_update"],
    # the test double (backends/scripted): everything its scripts can answer
    "scripted": [*KERNEL, "files"],
}


@pytest.mark.parametrize("builtin", sorted(DECLARED))
def test_each_builtin_backend_declares_what_its_docs_say(builtin):
    cls = get_backend_class(builtin)
    assert "capabilities" in {k for c in cls.__mro__ if c is not Backend for k in vars(c)}, \
        f"{builtin} states no capabilities of its own"
    assert cls.capabilities.names() == DECLARED[builtin]


def test_every_registered_backend_is_covered():
    assert set(DECLARED) <= set(backend_names())


def test_capabilities_are_a_frozen_value():
    caps = Capabilities(files=True)
    with pytest.raises(AttributeError):
        caps.files = False  # type: ignore[misc]
    assert caps.names() == ["files"] and Capabilities().names() == []


REQUIRED = ("start", "shutdown", "execute", "interrupt", "restart")
"""The five methods of the backend contract."""


def test_the_five_required_methods_are_abstract():
    assert Backend.__abstractmethods__ == frozenset(REQUIRED)


@pytest.mark.parametrize("missing", REQUIRED)
def test_a_backend_missing_a_required_method_fails_when_it_is_made(missing):
    async def method(self, *args, **kwargs): ...

    Half = type("Half", (Backend,), {name: method for name in REQUIRED if name != missing})
    with pytest.raises(TypeError, match=missing):
        Half()


class Bare(Backend):
    """The smallest backend: the five required methods and nothing declared."""

    name = "bare"

    async def start(self): ...
    async def shutdown(self): ...
    async def execute(self, code, emit, *, timeout=None, stdin=None): ...
    async def interrupt(self): ...
    async def restart(self): ...


async def test_undeclared_operations_say_not_supported(tmp_path):
    backend = Bare()
    with pytest.raises(NotSupported, match="The bare backend does not support file upload"):
        backend.require("files", "file upload")
    for call in (backend.complete("x", 1), backend.upload(tmp_path / "f", "f"), backend.comm_info(),
                 backend.set_allow_hosts(["example.org"]), backend.checkpoint("x"), backend.list_checkpoints(),
                 backend.restore(1), backend.drop_checkpoint(1)):
        with pytest.raises(NotSupported):
            await call


async def test_the_api_reads_the_declaration_before_it_calls(monkeypatch, tmp_path):
    sandbox = AsyncSandbox("local")
    monkeypatch.setattr(type(sandbox.backend), "capabilities", Capabilities())
    called = []
    monkeypatch.setattr(type(sandbox.backend), "upload", lambda *a: called.append(a))
    with pytest.raises(NotSupported, match="file upload"):
        await sandbox.upload(tmp_path / "f", "f")
    assert called == [] and sandbox.describe()["capabilities"] == []


async def test_local_cannot_change_a_running_sandboxs_hosts():
    sandbox = AsyncSandbox("local")
    with pytest.raises(NotSupported, match="The local backend does not support changing the allowed hosts"):
        await sandbox.allow("example.org")

"""``allow_hosts``, ``host_secrets`` and ``pypi_index`` on the e2b backend, through the real E2B SDK
over real HTTP to the local E2B-compatible server (tests/e2b_server.py): what E2B is asked to
enforce at create (``network`` of ``POST /v2/sandboxes``), the change of a running sandbox's list
(``PUT /sandboxes/{id}/network``, the state kept), and what the sandbox itself gets (placeholders,
never a secret's value). The enforcement is E2B's own egress proxy: the local server keeps the
settings and does not enforce them (docs/explanation/security.md, "E2B")."""

from __future__ import annotations

import pytest

from sandbox_kernel.core.errors import EgressError
from tests.support.recorder import Recorder

pytestmark = pytest.mark.e2b

TOKEN = "e2b-egress-test-token"
SECRET = "api.example.com Authorization: Bearer {env:E2B_EGRESS_TOKEN}"


async def test_allow_hosts_and_secrets_become_e2bs_network(make_e2b, e2b_server, monkeypatch):
    monkeypatch.setenv("E2B_EGRESS_TOKEN", TOKEN)  # read when the sandbox is made
    async with make_e2b(allow_hosts=["pypi", "*.example.org", "10.0.0.0/8"],
                    host_secrets=[SECRET]) as backend:
        rec = Recorder()
        await backend.execute("import os\nprint(os.environ['E2B_EGRESS_TOKEN'])", rec)
        network = e2b_server.get(backend.describe()["sandbox_id"]).network
    assert rec.text() == "sandbox-kernel-secret:E2B_EGRESS_TOKEN\n"
    assert network == {"allowOut": ["pypi.org", "files.pythonhosted.org", "*.example.org", "10.0.0.0/8",
                                    "api.example.com"],
                       "denyOut": ["0.0.0.0/0"],
                       "rules": {"api.example.com": [{"transform": {"headers": {"Authorization": f"Bearer {TOKEN}"}}}]}}


async def test_the_pypi_preset_points_pip_at_the_index(make_e2b, e2b_server):
    async with make_e2b(allow_hosts=["pypi"], pypi_index="http://index.test/simple/") as backend:
        rec = Recorder()
        await backend.execute("import os\nprint(os.environ['PIP_INDEX_URL'], os.environ['PIP_TRUSTED_HOST'])", rec)
        network = e2b_server.get(backend.describe()["sandbox_id"]).network
    assert rec.text() == "http://index.test/simple/ index.test\n"
    assert network == {"allowOut": ["index.test"], "denyOut": ["0.0.0.0/0"]}


async def test_allow_changes_a_running_sandbox_and_keeps_its_state(make_e2b, e2b_server):
    async with make_e2b() as backend:
        rec = Recorder()
        await backend.execute("x = 42", rec)
        sandbox_id = backend.describe()["sandbox_id"]
        assert e2b_server.get(sandbox_id).network is None  # no allow_hosts: E2B's default
        assert await backend.set_allow_hosts(["example.org"]) == ["example.org"]
        assert e2b_server.get(sandbox_id).network == {"allowOut": ["example.org"], "denyOut": ["0.0.0.0/0"]}
        assert await backend.set_allow_hosts([]) == []
        assert e2b_server.get(sandbox_id).network == {"allowOut": [], "denyOut": ["0.0.0.0/0"]}
        rec = Recorder()
        await backend.execute("print(x)", rec)
        assert rec.text() == "42\n" and backend.describe()["sandbox_id"] == sandbox_id
    with pytest.raises(EgressError, match="ports 80 and 443 only"):
        await make_e2b(allow_hosts=["api.example.com:8443"]).start()


async def test_an_attached_sandbox_gets_this_sessions_allowlist(make_e2b, e2b_server):
    """A sandbox kept alive by another session keeps the network it was made with (E2B's default:
    everything): attaching with allow_hosts puts this session's list on it."""
    async with make_e2b(keep_alive=True) as first:
        await first.execute("x = 42", Recorder())
        sandbox_id = first.describe()["sandbox_id"]
    assert e2b_server.get(sandbox_id).network is None
    async with make_e2b(sandbox_id=sandbox_id, allow_hosts=["example.org"]) as second:
        rec = Recorder()
        await second.execute("print(x)", rec)
        assert second.describe()["attached"] and rec.text() == "42\n"
        assert e2b_server.get(sandbox_id).network == {"allowOut": ["example.org"], "denyOut": ["0.0.0.0/0"]}

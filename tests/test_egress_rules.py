"""Egress by name, in process: the allowlist's entries and decisions, the secrets option, the pypi
preset, what the sandbox's environment gets, E2B's mapping, the refusal note, and the backends
that refuse the option (sandbox_kernel/backends/egress/, its notes.py, e2b/network.py)."""

from __future__ import annotations

import ipaddress

import pytest

from sandbox_kernel import Sandbox
from sandbox_kernel.backends.e2b.network import network_options
from sandbox_kernel.backends.egress.notes import RefusalNotes, refusal_line
from sandbox_kernel.backends.egress.options import (
    expand,
    parse_secret,
    pip_environment,
    placeholders,
    sandbox_environment,
)
from sandbox_kernel.backends.egress.rules import Allowlist, as_address, normalize, parse_entry, suggestion
from sandbox_kernel.core.errors import ConfigError, EgressError
from sandbox_kernel.core.events import Stream

pytestmark = pytest.mark.unit

A = ipaddress.ip_address


@pytest.mark.parametrize("entry, host, port, allowed", [
    ("pypi.org", "pypi.org", 443, True),
    ("pypi.org", "PyPI.org.", 80, True),           # case and the trailing dot do not matter
    ("pypi.org", "pypi.org", 8443, False),         # a name alone means ports 80 and 443
    ("pypi.org", "evil-pypi.org", 443, False),
    ("pypi.org", "pypi.org.evil.test", 443, False),
    ("api.test:8443", "api.test", 8443, True),
    ("api.test:8443", "api.test", 443, False),
    ("*.example.com", "a.b.example.com", 443, True),
    ("*.example.com", "example.com", 443, False),  # the wildcard is for names under the domain
    ("*.example.com", "badexample.com", 443, False),
    ("203.0.113.7", "203.0.113.7", 443, True),
    ("203.0.113.7", "203.0.113.8", 443, False),
    ("10.20.0.0/16:5432", "10.20.3.4", 5432, True),
    ("10.20.0.0/16:5432", "10.20.3.4", 443, False),
    ("[2001:db8::1]:443", "2001:db8::1", 443, True),
    ("203.0.113.7", "::ffff:203.0.113.7", 443, True),  # an IPv4-mapped address is its IPv4 one
    ("pypi.org", "151.101.0.223", 443, False),     # a name never allows an address
    ("bücher.example", "xn--bcher-kva.example", 443, True),
])
def test_allowlist(entry, host, port, allowed):
    assert Allowlist([entry]).allows(host, port) is allowed


@pytest.mark.parametrize("entry", ["", "exa mple.com", "*.", "a..b", "-x.com", "host:0", "host:70000", "host:http",
                                   "[::1", "*.*.com", "x" * 64 + ".com"])
def test_bad_entries_are_refused(entry):
    with pytest.raises(ValueError):
        parse_entry(entry)


def test_forbidden_addresses():
    allowlist = Allowlist(["example.com", "10.1.0.0/16"])
    own = {A("172.17.0.2"), A("172.17.0.1")}
    for address in ("127.0.0.1", "169.254.169.254", "0.0.0.0", "224.0.0.1", "::1", "fe80::1", "240.0.0.1",
                    "172.17.0.1", "172.17.0.2"):
        assert allowlist.forbidden(A(address), own), address
    assert "private" in allowlist.forbidden(A("192.168.1.1"), own)
    assert "private" in allowlist.forbidden(A("100.64.0.1"), own)
    assert allowlist.forbidden(A("10.1.2.3"), own) is None  # a network entry allows its private addresses
    assert allowlist.forbidden(A("93.184.215.14"), own) is None
    own_in_network = Allowlist(["172.17.0.0/16"])
    assert own_in_network.forbidden(A("172.17.0.1"), own)  # the gateway, even inside an allowed network


def test_names_and_suggestions():
    assert normalize(" Example.COM. ") == "example.com"
    assert as_address("[::ffff:10.0.0.1]") == A("10.0.0.1")
    assert as_address("example.com") is None
    assert suggestion("api.test", 443) == "api.test"
    assert suggestion("api.test", 8443) == "api.test:8443"
    assert suggestion("2001:db8::1", 8443) == "[2001:db8::1]:8443"


def test_secrets_option(monkeypatch, tmp_path):
    monkeypatch.setenv("API_TOKEN", "s3cret")
    (tmp_path / "key").write_text("from-a-file\n")
    secret = parse_secret("api.test Authorization: Bearer {env:API_TOKEN}")
    assert (secret.host, secret.header, secret.value()) == ("api.test", "Authorization", "Bearer s3cret")
    assert secret.variables == ["API_TOKEN"]
    assert parse_secret(f"api.test:8443 X-Key: {{file:{tmp_path / 'key'}}}").value() == "from-a-file"
    for bad in ("api.test", "api.test Authorization Bearer {env:X}", "api.test Authorization: Bearer abc",
                "*.test Authorization: {env:X}", "10.0.0.1 Authorization: {env:X}", "bad host X: {env:A}"):
        with pytest.raises(EgressError):
            parse_secret(bad)
    monkeypatch.delenv("API_TOKEN")
    with pytest.raises(EgressError, match="API_TOKEN .* is not set"):
        secret.value()


def test_pypi_preset_and_environment(monkeypatch):
    assert expand(["pypi"], [], "https://pypi.org/simple") == ["pypi.org", "files.pythonhosted.org"]
    assert expand(["pypi", "x.test"], [parse_secret("api.test A: {env:T}")], "http://index.test:8080/simple/") == [
        "index.test:8080", "x.test", "api.test"]
    with pytest.raises(EgressError, match="preset"):
        expand(["not a host"], [], "https://pypi.org/simple")
    assert pip_environment(["pypi"], "https://pypi.org/simple") == {}
    assert pip_environment(["pypi"], "http://index.test:8080/simple/") == {
        "PIP_INDEX_URL": "http://index.test:8080/simple/", "PIP_TRUSTED_HOST": "index.test"}
    secret = parse_secret("api.test Authorization: Bearer {env:API_TOKEN}")
    monkeypatch.setenv("API_TOKEN", "s3cret")
    env = sandbox_environment(["api.test"], [secret], "https://pypi.org/simple")
    assert env["HTTPS_PROXY"] == "http://127.0.0.1:3128" and "localhost" in env["NO_PROXY"]
    assert env["SSL_CERT_FILE"].endswith("ca-bundle.pem") and env["PIP_CERT"] == env["SSL_CERT_FILE"]
    assert env["API_TOKEN"] == placeholders([secret])["API_TOKEN"] != "s3cret"
    assert "s3cret" not in repr(env)


def test_e2b_mapping(monkeypatch):
    monkeypatch.setenv("API_TOKEN", "s3cret")
    secret = parse_secret("api.example.com Authorization: Bearer {env:API_TOKEN}")
    network = network_options(["pypi", "*.example.org", "10.0.0.0/8", "203.0.113.7:443"], [secret],
                              "https://pypi.org/simple")
    assert network == {"allow_out": ["pypi.org", "files.pythonhosted.org", "*.example.org", "10.0.0.0/8",
                                     "203.0.113.7", "api.example.com"],
                       "deny_out": ["0.0.0.0/0"],
                       "rules": {"api.example.com": [{"transform": {"headers": {"Authorization": "Bearer s3cret"}}}]}}
    assert network_options([], [], "https://pypi.org/simple") is None
    with pytest.raises(EgressError, match="ports 80 and 443 only"):
        network_options(["api.example.com:8443"], [], "https://pypi.org/simple")


def test_refusal_notes_once_per_host_and_cell():
    shown = []
    notes = RefusalNotes()
    event = {"event": "refused", "host": "attacker.test", "port": 80, "reason": "not allowed", "allowable": True}
    notes(event)  # outside a cell: logged only
    notes.begin(shown.append)
    for _ in range(3):
        notes(event)
    notes({**event, "port": 8080})
    notes({"event": "refused", "host": "api.test", "port": 443, "reason": "the TLS server name (SNI) is 'x.test'",
           "allowable": False})
    notes.end()
    notes.begin(shown.append)
    notes(event)
    assert [e.text for e in shown] == [
        "egress: refused attacker.test:80 (not allowed); to allow it, add 'attacker.test' to allow_hosts\n",
        "egress: refused attacker.test:8080 (not allowed); to allow it, add 'attacker.test:8080' to allow_hosts\n",
        "egress: refused api.test:443 (the TLS server name (SNI) is 'x.test')\n",
        "egress: refused attacker.test:80 (not allowed); to allow it, add 'attacker.test' to allow_hosts\n"]
    assert all(isinstance(e, Stream) and e.name == "stderr" for e in shown)
    assert refusal_line({"host": "2001:db8::1", "port": 443, "reason": "not allowed", "allowable": True}).startswith(
        "egress: refused [2001:db8::1]:443")
    shown.clear()
    notes.begin(shown.append)
    unread = {"event": "refused", "what": "a SOCKS5 connection", "reason": "the proxy speaks HTTP only",
              "allowable": False}  # what names no host: another protocol, a malformed target (proxy.py, heads.py)
    notes(unread)
    notes(unread)
    notes({**unread, "what": "CONNECT user@x.test:443", "reason": "a target with user information, USER@HOST"})
    assert [e.text for e in shown] == ["egress: refused a SOCKS5 connection (the proxy speaks HTTP only)\n",
                                       "egress: refused CONNECT user@x.test:443 (a target with user information, "
                                       "USER@HOST)\n"]


def test_local_refuses_allow_hosts_in_one_message():
    with pytest.raises(ConfigError) as caught:
        Sandbox("local", allow_hosts=["pypi"])
    assert str(caught.value).count("\n") == 0 and "docker backend" in str(caught.value)


def test_bad_values_are_one_line_errors():
    with pytest.raises(ConfigError, match="allow_hosts: 'not a host' is not a host name"):
        Sandbox("docker", allow_hosts=["not a host"])
    with pytest.raises(ConfigError, match="names no"):
        Sandbox("docker", host_secrets=["api.test Authorization: Bearer literal"])


async def test_gateway_refuses_allow_hosts_unless_its_own_policy_is_named():
    from sandbox_kernel.backends.gateway import GatewayBackend

    backend = GatewayBackend(url="http://127.0.0.1:9", allow_hosts=["example.org"])
    with pytest.raises(EgressError, match="cannot enforce allow_hosts: .* --GatewayBackend.network_policy=NAME"):
        await backend.start()  # refused before the gateway is asked anything
    named = GatewayBackend(url="http://127.0.0.1:9", allow_hosts=["example.org"], network_policy="kernels-egress")
    assert named.describe()["network"] == "the gateway's policy 'kernels-egress'"


def test_the_options_reach_every_door():
    """The kernelspec's argv and the MCP server's (traitlets' command-line config), the magic's
    line and the API's keywords all give the docker backend the same lists."""
    from sandbox_kernel.backends.docker import DockerBackend
    from sandbox_kernel.frontdoors.api import AsyncSandbox
    from sandbox_kernel.frontdoors.magics.options import backend_traits
    from sandbox_kernel.frontdoors.mcp.cli import options_config

    hosts, secret = ["pypi", "api.example.com:8443"], "api.example.com Authorization: Bearer {env:TOKEN}"
    argv = [f"--DockerBackend.allow_hosts={h}" for h in hosts] + [f"--DockerBackend.host_secrets={secret}"]
    by_config = AsyncSandbox("docker", config=options_config(argv)).backend
    by_line = DockerBackend(**backend_traits(DockerBackend, ["--allow-hosts", "pypi", "--allow-hosts",
                                                             "api.example.com:8443", "--host-secrets", secret]))
    by_keywords = AsyncSandbox("docker", allow_hosts=hosts, host_secrets=[secret]).backend
    for backend in (by_config, by_line, by_keywords):
        assert (list(backend.allow_hosts), list(backend.host_secrets)) == (hosts, [secret])
        assert backend.describe()["host_secrets"] == ["api.example.com Authorization"]
    with_port = DockerBackend(host_secrets=["api.example.com:8443 X-Key: {env:TOKEN}"])
    assert with_port.describe()["host_secrets"] == ["api.example.com:8443 X-Key"]  # host, port and header

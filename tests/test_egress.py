"""Egress by name on the real engine: ``allow_hosts``, the ``pypi`` preset, ``host_secrets`` and
allowlist changes of a running sandbox, through the Python API, the kernelspec and the magic, on
both transports (tests/test_egress_engines.py: Podman and a remote engine).

Every destination is the test's own (tests/support/egress.py): an index (pypiserver) serving
wheels made here, an HTTPS API with the test's own CA, an attacker that records every connection,
and the proxy's only resolver, which records every query. Refusals are checked at the proxy's
decision (the cell's notes) and at the test's listeners (the attacker's and resolver's logs).
"""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from sandbox_kernel import Sandbox
from sandbox_kernel.core.errors import EgressError
from tests.kernels import kernel, run, stdout
from tests.support import egress
from tests.support.host import host_arguments
from tests.targets import skip_or_fail

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

PROBES = Path(__file__).parent / "egress_rig" / "probes.py"
PROBED = ("rebind.test", "api.test:2525", "plain.test")
"""What the probes' sandbox allows besides the rig's index and API: a name that resolves to a
private address, a server that speaks first, a plain HTTP host for a tunnel of other bytes."""
WHEELS = dict([egress.make_wheel("egress-demo", "1.0", {"egress_demo/__init__.py": (
    "from egress_helper import WORD\nVALUE = 'installed from the test index, ' + WORD\n")}, ("egress-helper",)),
    egress.make_wheel("egress-helper", "1.0", {"egress_helper.py": "WORD = 'with its dependency'\n"})])
INSTALL = "%pip install egress-demo"
IMPORT = "import egress_demo\negress_demo.VALUE"
VALUE = "'installed from the test index, with its dependency'"


@pytest.fixture(scope="module")
def rig_on_engine(docker_client):
    for image in (egress.RIG_IMAGE, "sandbox-kernel-egress:latest"):
        if not docker_client.images.list(name=image):
            skip_or_fail(f"the image {image} is missing; {egress.SETUP}")
    with egress.rig(docker_client, WHEELS) as made:
        yield made


@pytest.fixture
def rig(rig_on_engine):
    """The module's rig, its servers' logs counted from this test on."""
    rig_on_engine.mark()
    return rig_on_engine


def quiet_outside(rig: egress.Rig, allowed: set[str]) -> None:
    """The attacker recorded nothing, and the resolver was asked only for ``allowed`` names."""
    assert rig.log("attacker") == []
    assert set(rig.dns_queries()) <= allowed, rig.dns_queries()


@pytest.mark.parametrize("transport", ["ipc", "api"])
def test_pip_install_then_import_through_the_api(rig, transport):
    with Sandbox("docker", transport=transport, **rig.options()) as sb:
        installed = sb.run(INSTALL)
        assert "Successfully installed egress-demo-1.0 egress-helper-1.0" in installed.stdout, installed
        assert sb.run(IMPORT).text == VALUE
        assert "egress: refused" not in installed.stderr
    quiet_outside(rig, {"index.test"})


def test_pip_install_then_import_through_the_kernelspec(rig):
    options = [f"--DockerBackend.{name}={value}" for name, values in rig.options().items()
               for value in (values if isinstance(values, list) else [values])]
    with kernel("docker", *options) as (_, kc):
        reply, outputs = run(kc, INSTALL, timeout=120)
        assert reply["status"] == "ok" and "Successfully installed egress-demo-1.0" in stdout(outputs)
        reply, outputs = run(kc, IMPORT)
        assert [m["content"]["data"]["text/plain"] for m in outputs if m["msg_type"] == "execute_result"] == [VALUE]
    quiet_outside(rig, {"index.test"})


def test_pip_install_then_import_through_the_magic(rig, tmp_path):
    flags = " ".join(f"--{name.replace('_', '-')} {value}" for name, values in rig.options().items()
                     for value in (values if isinstance(values, list) else [values]))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for code in (
        "%load_ext magics", f"%%sandbox --backend docker {flags}\n{INSTALL}", f"%%sandbox\n{IMPORT}")])
    NotebookClient(nb, kernel_name="python3", timeout=180, extra_arguments=host_arguments("docker"),
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert "Successfully installed egress-demo-1.0" in "".join(o.get("text", "") for o in nb.cells[1].outputs)
    assert [o["data"]["text/plain"] for o in nb.cells[2].outputs if o["output_type"] == "execute_result"] == [VALUE]
    quiet_outside(rig, {"index.test"})


def test_probes_reach_nothing_and_fail_at_once(rig, tmp_path):
    (tmp_path / "rig-ca.pem").write_text(rig.ca.ca_pem)
    with Sandbox("docker", **rig.options(*PROBED)) as sb:
        sb.upload(tmp_path / "rig-ca.pem", "rig-ca.pem")
        assert sb.run("import urllib.request\nurllib.request.urlopen('http://index.test:8080/simple/').status").text == "200"
        proxy = rig.client.containers.get(sb.describe()["egress_proxy"])
        addresses = {**rig.addresses, "gateway": rig.gateway,
                     "proxy": proxy.attrs["NetworkSettings"]["Networks"][rig.network]["IPAddress"]}
        started = time.monotonic()
        result = sb.run(f"RIG = {addresses!r}\n" + PROBES.read_text(), timeout=300)
        elapsed = time.monotonic() - started
    outcomes = json.loads(result.stdout.strip().splitlines()[-1])
    leaks = {name: o for name, o in outcomes.items() if o[0].startswith("reached") != name.startswith("control")}
    assert not leaks, leaks
    assert len(outcomes) >= 40
    slow = {name: o for name, o in outcomes.items() if o[1] > 5.5 or "timed out" in o[0] or "Timeout" in o[0]}
    assert not slow, slow  # a refusal fails at once: nothing waits for a timeout of its own (the probes' is 3-5 s)
    notes = [line for line in result.stderr.splitlines() if line.startswith("egress: refused")]
    for host in ("attacker.test:80 (not allowed)", "attacker.test:443", f"{rig.addresses['attacker']}:80",
                 "api.test:8443", "api.test:443 (the TLS server name (SNI) is 'attacker.test')",
                 "index.test:8080 (the Host header names 'attacker.test')", "127.0.0.1:3129",
                 "rebind.test:80 (it resolves to", f"{rig.gateway}:80", "host.docker.internal:80", "[::1]:80"):
        assert any(f"refused {host}" in line for line in notes), (host, notes)
    for unread in ("a SOCKS5 connection (the proxy speaks HTTP only", "a SOCKS4 connection (",
                   "GET http://index.test:8080/simple/ (a request line without HTTP/1.0 or 1.1",
                   "TLS to the proxy itself (", "plain.test:80 (neither TLS nor HTTP: it began b'\\x00",
                   "api.test:2525 (the server spoke first", "CONNECT index.test:8080@attacker.test:80 (a target with "
                   "user information", "CONNECT %61ttacker.test:80 (a percent-encoded host name",
                   "CONNECT index.test:8080 (a request line without",
                   "a request (a request the proxy cannot read: Bad HTTP request line: b'GET http://index.test:8080@"):
        assert any(line.startswith(f"egress: refused {unread}") for line in notes), (unread, notes)
    for malformed in ("userinfo in a CONNECT target", "a percent-encoded CONNECT target", "CRLF in a CONNECT target",
                      "HTTP/0.9", "userinfo in a second request on one connection"):  # the project's refusal, not mitmproxy's bare 400
        assert "sandbox-kernel egress refused" in outcomes[f"proxy: {malformed}"][0], outcomes
    shown = [line.split(" (")[0] for line in notes]
    assert len(shown) == len(set(shown)), "one line per refused host and port in a cell"
    assert elapsed < 120
    quiet_outside(rig, {"index.test", "api.test", "rebind.test", "plain.test"})


def test_secret_reaches_the_api_and_nowhere_else(rig, tmp_path, monkeypatch):
    token = "egress-test-" + secrets.token_hex(16)
    monkeypatch.setenv("EGRESS_TEST_TOKEN", token)
    (tmp_path / "ca.pem").write_text(rig.ca.ca_pem)
    options = {**rig.options("plain.test"), "host_secrets": ["api.test Authorization: Bearer {env:EGRESS_TEST_TOKEN}"],
               "egress_ca": str(tmp_path / "ca.pem")}
    argv = [f"--DockerBackend.{name}={value}" for name, values in options.items()
            for value in (values if isinstance(values, list) else [values])]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for code in SECRET_CELLS])
    NotebookClient(nb, kernel_name="sandbox-docker", timeout=180, extra_arguments=argv,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    saved = nbformat.writes(nb)
    (tmp_path / "secret.ipynb").write_text(saved)
    texts = ["".join(o.get("text", "") or json.dumps(o.get("data", {})) for o in cell.outputs) for cell in nb.cells]
    assert json.loads(texts[0]) == {"role": "api", "path": "/secret", "authorized": True}
    assert texts[1].strip() == "sandbox-kernel-secret:EGRESS_TEST_TOKEN"
    assert "hits 0 in" in texts[2] and "files 0" not in texts[2], texts[2]
    assert token not in saved and "sandbox-kernel-secret:EGRESS_TEST_TOKEN" in saved
    seen = {(entry["path"], entry["headers"].get("Authorization")) for entry in rig.log("api")}
    assert ("/secret", f"Bearer {token}") in seen  # the API got the real header, over TLS the proxy verified
    assert ("/other", None) in seen and ("/plain", None) in seen  # plain HTTP, another name: no secret
    quiet_outside(rig, {"api.test", "plain.test"})


SECRET_CELLS = [
    "import urllib.request\nprint(urllib.request.urlopen('https://api.test/secret').read().decode())",
    "import os\nprint(os.environ['EGRESS_TEST_TOKEN'])",
    # the environment, /proc and the files the sandbox can read: no trace of the token. The sandbox
    # does not know it (that is the point): it looks for its prefix, which the placeholder lacks,
    # spelt so that this cell's own source (kept in IPython's history under /tmp) does not hold it.
    """import os, urllib.request
urllib.request.urlopen('http://api.test/other').read(); urllib.request.urlopen('http://plain.test/plain').read()
needle = ('egress' + '-test-').encode()
hits, files = 0, 0
for root in ('/tmp', '/home', '/run', '/etc', '/proc'):
    for folder, dirs, names in os.walk(root):
        if folder.startswith('/proc/') and folder.count('/') > 2:
            dirs[:] = []
        for name in names:
            path = os.path.join(folder, name)
            if folder.startswith('/proc') and name not in ('environ', 'cmdline'):
                continue
            try:
                with open(path, 'rb') as f:
                    data = f.read(4 * 1024**2)
            except OSError:
                continue
            files += 1
            hits += needle in data
hits += needle.decode() in repr(dict(os.environ))
print('hits', hits, 'in', files, 'files')""",
]


def test_allow_a_host_while_running_keeps_the_state(rig):
    with Sandbox("docker", **rig.options()) as sb:
        sb.run("x = 42\nimport urllib.request")
        fetch = "print(urllib.request.urlopen('http://mirror.test:8080/simple/').status)"
        refused = sb.run(fetch)
        assert refused.error is not None and "egress: refused mirror.test:8080 (not allowed); to allow it, add " \
                                             "'mirror.test:8080' to allow_hosts" in refused.stderr
        started = time.monotonic()
        entries = sb.allow("mirror.test:8080")
        assert time.monotonic() - started < 10.0 and "mirror.test:8080" in entries  # a generous bound: in force
        # when it returns is what the next fetch checks
        assert sb.run(fetch).stdout.strip() == "200"
        assert sb.run("x").text == "42"
        with pytest.raises(EgressError, match="is not a host name"):
            sb.allow("not a host")
    quiet_outside(rig, {"index.test", "mirror.test"})


def test_allow_needs_a_proxy_to_change():
    with Sandbox("docker") as sb:
        sb.run("1")
        with pytest.raises(EgressError, match="started without allow_hosts"):
            sb.allow("example.org")


def test_allow_line_in_the_kernel_asks_first_and_the_magic_takes_it(rig, tmp_path):
    """``%sandbox allow HOST`` in a sandbox-docker notebook widens the egress only with the
    user's consent (refused where nobody can answer, unless egress_commands=allow), keeping the
    state; ``%sandbox allow`` of the magic does the same for a session of a python3 notebook."""
    options = [f"--DockerBackend.{name}={value}" for name, values in rig.options().items()
               for value in (values if isinstance(values, list) else [values])]
    fetch = "import urllib.request\nprint(urllib.request.urlopen('http://mirror.test:8080/simple/').status)"
    with kernel("docker", *options) as (_, kc):
        assert run(kc, "x = 42")[0]["status"] == "ok"
        reply, _ = run(kc, "%sandbox allow mirror.test:8080", allow_stdin=False)
        assert reply["status"] == "error" and "--SandboxKernel.egress_commands=allow" in reply["evalue"]
    with kernel("docker", *options, "--SandboxKernel.egress_commands=allow") as (_, kc):
        run(kc, "x = 42")
        reply, outputs = run(kc, "%sandbox allow mirror.test:8080")
        assert reply["status"] == "ok" and "mirror.test:8080" in stdout(outputs), reply
        reply, outputs = run(kc, fetch + "\nprint(x)")
        assert reply["status"] == "ok" and stdout(outputs).split() == ["200", "42"]
    flags = " ".join(f"--{name.replace('_', '-')} {value}" for name, values in rig.options().items()
                     for value in (values if isinstance(values, list) else [values]))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for code in (
        "%load_ext magics", f"%%sandbox --backend docker {flags}\nx = 42", "%sandbox allow mirror.test:8080",
        f"%%sandbox\n{fetch}\nprint(x)")])
    NotebookClient(nb, kernel_name="python3", timeout=180, extra_arguments=host_arguments("docker"),
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert "may now reach" in nb.cells[2].outputs[0]["text"] and "mirror.test:8080" in nb.cells[2].outputs[0]["text"]
    assert "".join(o.get("text", "") for o in nb.cells[3].outputs).split() == ["200", "42"]
    quiet_outside(rig, {"index.test", "mirror.test"})


FAIL_CLOSED = """
import asyncio
from types import SimpleNamespace as NS
import egress_proxy
policy = egress_proxy.Policy({"allow": ["ok.test"]})
flow = NS(response=None, server_conn=NS(id="x", tls_established=False),
          request=NS(method="GET", host="ok.test", port=80, host_header="a..b", first_line_format="absolute"))
policy.requestheaders(flow)  # a Host header the rules cannot read
data = NS(server=NS(address=("ok.test", 80), sni=None, error=None))
async def broken(name, port):
    raise ValueError("a resolver that fails oddly")
policy._resolve = broken
asyncio.run(policy.server_connect(data))
print("RESULT", flow.response.status_code, data.server.error)
"""


def test_a_check_that_raises_refuses(docker_client):
    """mitmproxy logs an addon's exception and carries on: the proxy's hooks refuse instead of
    letting an unchecked request out. Run in the proxy's image with its own mitmproxy."""
    from sandbox_kernel.backends.docker.proxy_spec import IMAGE
    from sandbox_kernel.backends.egress.bootstrap import sources

    files = [(f"{name}.py", text) for name, text in sources()] + [("check.py", FAIL_CLOSED)]
    write = "; ".join(f"open({name!r}, 'w').write({text!r})" for name, text in files)
    out = docker_client.containers.run(IMAGE, ["sh", "-c", 'cd /tmp && python -c "$0" && python check.py', write],
                                network_mode="none", remove=True, stdout=True, stderr=False).decode()
    assert "RESULT 403 sandbox-kernel egress refused ok.test:80: the proxy could not check it (ValueError)" in out, out

"""The output policy through the wrapper kernel, on every backend: what a notebook page receives.

The kernel is started from its installed kernelspec as a frontend starts it, one per backend
for the module's tests of it. The proof in a real browser (JupyterLab in Chromium) is
tests/test_browser.py.
"""

from __future__ import annotations

import html
import re

import pytest

from tests.kernels import kernel, run, stdout
from tests.targets import NAMES

pytestmark = pytest.mark.kernel

HOSTILE = """\
from IPython.display import display, HTML, Javascript, Markdown, SVG
display(HTML('<img src=x onerror="fetch(1)"><b>bold</b><img src="http://127.0.0.1:9/leak">'))
display(Javascript('fetch("/api/terminals", {method: "POST"})'))
display(Markdown('*md* <img src=x onerror="fetch(1)"> ![x](http://127.0.0.1:9/leak2)'))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" onload="fetch(1)"><rect width="5" height="5"/></svg>'))
display({'text/html': '<button data-commandlinker-command="terminal:create-new">x</button>',
         'application/vnd.bokehjs_exec.v0+json': {}}, raw=True)
HTML('<style>b{color:red;background:url(http://127.0.0.1:9/leak3)}</style><b>x</b>')
"""


def rich(outputs):
    return [m["content"] for m in outputs if m["header"]["msg_type"] in ("display_data", "execute_result")]


@pytest.fixture(scope="module", params=NAMES)
def backend_name(request, targets) -> str:
    """Each backend's name in turn, for the module: its tests of one backend share ``policy_kernel``."""
    targets.prepared(request.param)
    return request.param


@pytest.fixture(scope="module")
def policy_kernel(backend_name):
    """One kernel of ``backend_name``, started from its kernelspec, that the module's tests of it
    share: one reads a cell's outputs, the other makes the sandbox's kernel answer
    ``inspect_request`` with hostile HTML (what no other test here asks)."""
    with kernel(backend_name) as (_, kc):
        yield kc


def test_default_policy_sanitizes_every_rich_output(policy_kernel, backend_name):
    reply, outputs = run(policy_kernel, HOSTILE, timeout=120)
    assert reply["status"] == "ok"
    bundles = [c["data"] for c in rich(outputs)]
    assert len(bundles) == 6, [(m["header"]["msg_type"], m["content"]) for m in outputs]  # one per display
    page, script, markdown, svg, linker, styled = bundles
    assert page["text/html"] == '<img src="x"><b>bold</b><img>'
    assert set(script) == {"text/plain"} and "--SandboxKernel.output_policy=isolate" in script["text/plain"]
    assert "text/markdown" not in markdown and "onerror" not in markdown["text/html"]
    assert "127.0.0.1" not in markdown["text/html"] and "<em>md</em>" in markdown["text/html"]
    if "image/svg+xml" in svg:  # e2b's results carry SVG as such; all kernels do
        assert "onload" not in svg["image/svg+xml"] and "<rect" in svg["image/svg+xml"]
    assert linker["text/html"] == "x"  # no button, no command-linker attribute
    assert "application/vnd.bokehjs_exec.v0+json" not in linker
    assert "url(" not in styled["text/html"] and "color: red" in styled["text/html"]
    assert stdout(outputs, "stderr").count("[output policy 'sanitize'") == 1


def test_policy_options_on_the_kernel(tmp_path):
    """isolate frames active content in an opaque origin; trust passes it; allowed_origins loads images."""
    code = "from IPython.display import HTML\nHTML('<script>document.title = 1</script><img src=\"http://127.0.0.1:9/i.png\">')"
    with kernel("local", "--SandboxKernel.output_policy=isolate") as (_, kc):
        [result] = rich(run(kc, code)[1])
        frame = result["data"]["text/html"]
        assert frame.startswith('<iframe sandbox="allow-scripts" srcdoc="') and "allow-same-origin" not in frame
        srcdoc = html.unescape(re.search(r'srcdoc="([^"]*)"', frame).group(1))
        assert "<script>document.title = 1</script>" in srcdoc and "connect-src 'none'" in srcdoc
    with kernel("local", "--SandboxKernel.output_policy=trust") as (_, kc):
        [result] = rich(run(kc, code)[1])
        assert result["data"]["text/html"].startswith("<script>document.title = 1</script>")
    with kernel("local", "--SandboxKernel.allowed_origins=http://127.0.0.1:9") as (_, kc):
        [result] = rich(run(kc, code)[1])
        assert result["data"]["text/html"] == '<img src="http://127.0.0.1:9/i.png">'
    with kernel("local", "--SandboxKernel.output_policy=off") as (_, kc):
        reply, outputs = run(kc, "1")
        assert reply["status"] == "error" and "output_policy" in reply["evalue"]


def test_an_inspect_reply_passes_the_policy(policy_kernel, backend_name):
    """Shift+Tab's tooltip renders the inspect_reply's bundle in the page: the policy applies.
    The sandbox's kernel is made to answer with hostile HTML (its own code can patch it)."""
    code = ("kernel = get_ipython().kernel\n"
            "def do_inspect(code, cursor_pos, detail_level=0, omit_sections=()):\n"
            "    return {'status': 'ok', 'found': True, 'metadata': {'text/html': {'isolated': True}},\n"
            "            'data': {'text/html': '<img src=\"https://x.example/leak\" onerror=\"x()\"><b>doc</b>',\n"
            "                     'application/x-other': 'x', 'text/plain': 'help'}}\n"
            "kernel.do_inspect = do_inspect\n")
    assert run(policy_kernel, code, timeout=120)[0]["status"] == "ok"
    reply = policy_kernel.inspect("len", 3, reply=True, timeout=60)["content"]
    if backend_name == "e2b":  # E2B's code interpreter has no inspection: the fallback reply
        assert reply == {"status": "ok", "found": False, "data": {}, "metadata": {}}
        return
    assert reply["found"] and reply["data"]["text/plain"] == "help" and reply["metadata"] == {}
    assert reply["data"]["text/html"] == "<img><b>doc</b>" and "application/x-other" not in reply["data"]

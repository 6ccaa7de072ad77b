"""The output policy: what of a sandbox's rich outputs may act in the user's page.

JupyterLab marks every output of a cell the user ran as trusted: ``text/html`` runs its
scripts and event handlers, ``application/javascript`` is evaluated, Markdown goes through the
same HTML path, all with the page's Jupyter credentials (which can write files and open
terminals on the host). Only the kernel can decide, so every MIME bundle from a sandbox
passes through :meth:`OutputPolicy.bundle` before any front door shows it:

``sanitize`` (the default)
    ``text/html``, ``text/markdown`` (its HTML, links and images) and ``image/svg+xml`` are
    sanitized (:mod:`sandbox_kernel.sanitize`); script MIME types are dropped, with a
    ``text/plain`` note naming the option that allows them. Nothing left makes the browser
    fetch from another origin by itself (the sandbox's network stays off in the page too).
``isolate``
    Active HTML and JavaScript are shown inside ``<iframe sandbox="allow-scripts">`` (no
    ``allow-same-origin``: an opaque origin with no access to the page, its cookies or the
    server's API), with a Content-Security-Policy that blocks network access except to
    ``allowed_origins``; what has nothing active is shown sanitized, as under ``sanitize``.
``trust``
    Outputs pass unchanged: sandboxed code gets the user's Jupyter rights. An explicit opt-in.

Data-only renderers (``image/png``, ``application/json``, ...) and unknown MIME types pass
unchanged, except types known to carry code for a frontend extension (BokehJS and HoloViews
``*_exec``/``*_load``). Vega, Vega-Lite and Plotly specs pass without the URLs their renderers
would fetch by themselves (``data.url``, an image mark's ``url``, ``layout.images[].source``),
unless they are inline ``data:`` or from ``allowed_origins``.
"""

from __future__ import annotations

import re
from dataclasses import replace
from collections.abc import Callable
from typing import Any

from traitlets import CaselessStrEnum, HasTraits, List, Unicode

from .events import Display
from .sanitize import Sanitizer, escape_attribute, render_markdown

POLICIES = ("sanitize", "isolate", "trust")
STANDARD_WIDGET_MODULES = ("@jupyter-widgets/base", "@jupyter-widgets/controls", "@jupyter-widgets/output")

SCRIPT_MIME = re.compile(r"javascript|ecmascript|_exec\b|_exec\.|_load\b|_load\.|xhtml", re.IGNORECASE)
"""MIME types that carry code for the page: ``application/javascript`` and its aliases,
BokehJS/HoloViews ``application/vnd.*_exec.v0+json`` and ``*_load.v0+json``, XHTML."""

Hint = Callable[[str, str], str] | None


def kernel_hint(option: str, value: str) -> str:
    """How a kernel user sets an option: ``--SandboxKernel.output_policy=isolate``."""
    return f"--SandboxKernel.{option}={value}"


CHART_MIME = re.compile(r"^application/vnd\.(vega|vegalite|plotly)\.", re.IGNORECASE)
"""JSON chart specs whose renderers fetch the URLs they name (:data:`CHART_URL_KEYS`)."""
CHART_URL_KEYS = frozenset({"url", "source", "topojsonURL"})

FRAME_HEIGHT = 420
"""Initial height of an isolated frame with script and no stated size, in CSS pixels (charts
draw themselves about this high); without script, :data:`FRAME_HEIGHT_STATIC`. The user can
drag the frame's corner."""
FRAME_HEIGHT_STATIC = 160
_STATED_HEIGHT = re.compile(r"""height\s*[:=]\s*["']?\s*(\d{2,4})(?:px)?\b""", re.IGNORECASE)


def frame_height(document: str) -> int:
    """CSS pixels for a frame showing ``document``: the largest height it states (``height="300"``,
    ``height: 300px``) plus a margin, within 60–800; else a default by whether it has script."""
    stated = [int(h) for h in _STATED_HEIGHT.findall(document[:200_000])]
    if stated:
        return max(60, min(800, max(stated) + 24))
    return FRAME_HEIGHT if "<script" in document.lower() else FRAME_HEIGHT_STATIC


class OutputOptions(HasTraits):
    """The output policy's options, shared by the kernel (``--SandboxKernel.output_policy``)
    and the magic (``SandboxMagics.output_policy``, ``%%sandbox --output-policy``)."""

    output_policy = CaselessStrEnum(
        POLICIES, default_value="sanitize",
        help="What sandbox outputs may do in the page: 'sanitize' (default: HTML/Markdown/SVG sanitized, "
             "scripts dropped, no external fetches), 'isolate' (active content in an isolated frame) or "
             "'trust' (unchanged: sandboxed code gets your Jupyter rights in the browser).").tag(config=True)
    allowed_origins = List(Unicode(), help="Origins (e.g. 'https://cdn.example.org') whose images may load "
                                           "in sanitized output and whose resources isolated frames may load."
                           ).tag(config=True)
    allowed_widget_modules = List(Unicode(), default_value=list(STANDARD_WIDGET_MODULES),
                                  help="Widget model/view modules the sandbox may open (under 'sanitize' and "
                                       "'isolate'); add e.g. 'bqplot' for a trusted extension.").tag(config=True)
    allowed_comm_targets = List(Unicode(), default_value=["jupyter.widget"],
                                help="Comm targets the sandbox may open (under 'sanitize' and 'isolate').").tag(
        config=True)

    def make_policy(self, hint: Hint = None) -> OutputPolicy:
        """The :class:`OutputPolicy` these options describe; ``hint(option, value)`` says how
        the user sets an option at this front door."""
        return OutputPolicy(self.output_policy, self.allowed_origins, hint=hint,
                            widget_modules=self.allowed_widget_modules, comm_targets=self.allowed_comm_targets)


class OutputPolicy:
    """Applies one policy to MIME bundles (:meth:`bundle`) and HTML strings (:meth:`html`).

    Args:
        mode: ``sanitize``, ``isolate`` or ``trust``.
        allowed_origins: see :class:`OutputOptions`.
        hint: ``hint(option, value)`` → how to set an option at this front door; default:
            ``--SandboxKernel.OPTION=VALUE``.
        widget_modules, comm_targets: see :class:`OutputOptions` (used by the widget rules).
    """

    def __init__(self, mode: str = "sanitize", allowed_origins: list[str] | tuple[str, ...] = (), *,
                 hint: Hint = None,
                 widget_modules: list[str] | tuple[str, ...] = STANDARD_WIDGET_MODULES,
                 comm_targets: list[str] | tuple[str, ...] = ("jupyter.widget",)) -> None:
        if mode not in POLICIES:
            raise ValueError(f"unknown output policy {mode!r} (one of: {', '.join(POLICIES)})")
        self.mode = mode
        self.allowed_origins = tuple(allowed_origins)
        self.widget_modules = frozenset(widget_modules)
        self.comm_targets = frozenset(comm_targets)
        self.hint = hint or kernel_hint
        self.sanitizer = Sanitizer(self.allowed_origins)

    @property
    def trusts(self) -> bool:
        return self.mode == "trust"

    def option(self, option: str, value: str) -> str:
        """How the user sets ``option`` to ``value`` here, e.g. ``--SandboxKernel.output_policy=isolate``."""
        return self.hint(option, value)

    def note(self) -> str:
        """The one line a cell shows the first time the policy changed its output."""
        if self.mode == "isolate":
            return (f"[output policy 'isolate': active content of this cell is shown in isolated frames, without "
                    f"access to this page; {self.option('output_policy', 'trust')} gives it your Jupyter rights]\n")
        return (f"[output policy 'sanitize': scripts, event handlers and external resources were removed from this "
                f"cell's output; {self.option('output_policy', 'isolate')} shows them in an isolated frame]\n")

    # -- HTML strings (displays and widget values) -------------------------------------------
    def html(self, source: str) -> tuple[str, bool]:
        """``(html, changed)``: ``source`` as this policy lets it reach the page."""
        if self.trusts:
            return source, False
        clean, changed = self.sanitizer.html(source)
        if changed and self.mode == "isolate":
            return self.frame(source), True
        return clean, changed

    def frame(self, document: str) -> str:
        """``document`` inside an opaque-origin frame: scripts run, but cannot reach the page,
        its cookies or the Jupyter server; network only to ``allowed_origins``."""
        sources = " ".join(self.allowed_origins)
        csp = (f"default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval' blob: data: {sources}; "
               f"style-src 'unsafe-inline' data: {sources}; img-src data: blob: {sources}; "
               f"font-src data: {sources}; media-src data: blob: {sources}; connect-src {sources or chr(39) + 'none' + chr(39)}")
        page = (f'<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="{csp}">'
                f'<meta charset="utf-8"><style>body{{margin:0;font-family:sans-serif}}</style></head>'
                f"<body>{document}</body></html>")
        return (f'<iframe sandbox="allow-scripts" srcdoc="{escape_attribute(page)}" '
                f'style="width:100%;height:{frame_height(document)}px;border:0;resize:vertical;overflow:auto" '
                f'title="Isolated sandbox output (no access to this page)"></iframe>')

    # -- MIME bundles ------------------------------------------------------------------------
    def bundle(self, data: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """``(data, changed)``: a MIME bundle as this policy lets it reach the page. Returns
        the same dict when nothing changed."""
        if self.trusts or not any(_reviewed(mime) for mime in data):
            return data, False
        out: dict[str, Any] = {}
        changed = False
        scripts = []
        for mime, value in data.items():
            if SCRIPT_MIME.search(mime):
                scripts.append((mime, value))
                changed = True
            elif mime == "text/html":
                out[mime], did = self.html(_text(value))
                changed |= did
            elif mime == "image/svg+xml":
                out[mime], did = self.sanitizer.svg(_text(value))
                changed |= did
            elif mime == "text/markdown":
                changed |= self._markdown(_text(value), out, data)
            elif CHART_MIME.match(mime):
                out[mime], did = self._chart(value)
                changed |= did
            else:
                out[mime] = value
        if scripts:
            self._scripts(scripts, out)
        return (out, True) if changed else (data, False)

    def display(self, event: Display) -> tuple[Display, bool]:
        """``(event, changed)`` with its bundle under this policy."""
        data, changed = self.bundle(event.data)
        return (replace(event, data=data) if changed else event), changed

    def _markdown(self, source: str, out: dict[str, Any], data: dict[str, Any]) -> bool:
        html, changed = self.sanitizer.markdown(source)
        if html is None:  # plain Markdown: shown as Markdown
            out["text/markdown"] = source
            return False
        if "text/html" not in data:  # else the bundle's own (policed) HTML is shown instead
            out["text/html"] = self.frame(render_markdown(source)) if changed and self.mode == "isolate" else html
        return True

    def _chart(self, spec: Any) -> tuple[Any, bool]:
        """``(spec, changed)``: a chart spec without URLs its renderer would fetch by itself."""
        if isinstance(spec, dict):
            out, changed = {}, False
            for key, value in spec.items():
                if key in CHART_URL_KEYS and isinstance(value, str) and not self.sanitizer.url_ok("img", "src", value):
                    changed = True
                    continue
                out[key], did = self._chart(value)
                changed |= did
            return (out, True) if changed else (spec, False)
        if isinstance(spec, list):
            items = [self._chart(v) for v in spec]
            if any(did for _, did in items):
                return [v for v, _ in items], True
        return spec, False

    def _scripts(self, scripts: list[tuple[str, Any]], out: dict[str, Any]) -> None:
        """Script MIME types: run in a frame under ``isolate`` (JavaScript only, where the
        bundle has no HTML of its own), else replaced by a note."""
        code = next((_text(v) for m, v in scripts if "javascript" in m.lower()), None)
        if self.mode == "isolate" and code is not None and "text/html" not in out:
            out["text/html"] = self.frame(f"<script>{code}</script>")
            return
        if not any(m in out for m in ("text/html", "text/markdown", "image/png", "image/svg+xml", "image/jpeg")):
            kinds = ", ".join(m for m, _ in scripts)
            out["text/plain"] = (f"[{kinds} output not shown: the output policy '{self.mode}' runs no scripts "
                                 f"from the sandbox in this page; "
                                 f"{self.option('output_policy', 'isolate' if self.mode == 'sanitize' else 'trust')} "
                                 "allows it]")


def _reviewed(mime: str) -> bool:
    return mime in ("text/html", "text/markdown", "image/svg+xml") or bool(SCRIPT_MIME.search(mime)) \
        or bool(CHART_MIME.match(mime))


def _text(value: Any) -> str:
    """A MIME value as text (notebook files may hold multi-line strings as lists)."""
    return "".join(value) if isinstance(value, list) else str(value)

"""The closed list of renderers: one rule for each MIME type JupyterLab 4 / Notebook 7 draw.

JupyterLab 4.6.6 (``@jupyterlab/rendermime``'s ``standardRendererFactories`` and the core
extensions: ``@jupyterlab/vega5-extension``, ``@jupyterlab/mermaid-extension``,
``@jupyterlab/pdf-extension``, ``@jupyterlab/json-extension``, the ipywidgets manager) draws
the types below. Each has a rule (:class:`Rule`), written against the renderer that draws it,
and the rule carries its own police function (a type added here is policed by what it says,
never by another type's rule):

``data``
    the value is data the renderer shows and never runs or fetches (text, base64 images,
    JSON): it passes as a canonical copy of the right type, or is dropped;
``policed``
    the value is rewritten by the policy (HTML, Markdown, LaTeX, SVG, Mermaid, Vega);
``script``
    the renderer runs it (JavaScript): dropped, or framed under ``isolate``;
``refused``
    the renderer acts in ways no rule can check (PDF: Chromium's viewer runs the PDF's own
    JavaScript and forms, in a same-origin frame): dropped with the one-line note.

A type not listed here is unknown: dropped with a note naming ``allowed_mime_types``, which lets
named types through for a frontend with extra extensions (then that extension's rules apply;
Plotly's figures are still policed by :func:`.charts.plotly_figure`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .charts import VEGA_METADATA, plain_json, vega_refusal, vega_spec
from .mermaid import mermaid
from .tex import police_tex

_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")


Police = Callable[[Any, Any], tuple[Any, bool]]
"""``police(policy, value) -> (value, changed)``: a rule's function, given the
:class:`~.core.OutputPolicy` applying it; ``value`` None: refused."""


@dataclass(frozen=True)
class Rule:
    """How one MIME type reaches the page.

    Attributes:
        kind: ``data``, ``policed``, ``script`` or ``refused`` (see the module docstring).
        renderer: the JupyterLab renderer the rule answers (for the docs and notes).
        police: for ``data`` and ``policed``, what the policy does to a value of the type.
        shown_as: the type the policed value is shown as (Markdown: ``text/html``), when not its own.
        refusal: ``refusal(value)``: why a value ``police`` refused is not shown (for the note).
    """

    kind: str
    renderer: str
    police: Police | None = None
    shown_as: str | None = None
    refusal: Callable[[Any], str | None] | None = None


def _data(mime: str) -> Police:
    return lambda policy, value: data_value(mime, value)


def _vega(lite: bool) -> dict[str, Any]:
    return {"police": lambda policy, value: vega_spec(value, lite), "refusal": lambda value: vega_refusal(value, lite)}


_VEGA_EMBED = "@jupyterlab/vega5-extension (vega-embed 6.21)"
_IMAGE = "rendermime RenderedImage (<img src=data:...>)"
RENDERERS: dict[str, Rule] = {
    "text/plain": Rule("data", "rendermime text renderer (ANSI colours, URLs made links)", _data("text/plain")),
    "text/html": Rule("policed", "rendermime RenderedHTML (trusted: scripts run; maths typeset)",
                      lambda policy, value: policy.html(text(value))),
    "text/markdown": Rule("policed", "rendermime RenderedMarkdown (marked; HTML, maths, mermaid fences)",
                          lambda policy, value: policy.markdown(text(value)), shown_as="text/html"),
    "text/latex": Rule("policed", "rendermime RenderedLatex (MathJax 3.2)",
                       lambda policy, value: police_tex(text(value))),
    "image/svg+xml": Rule("policed", "rendermime RenderedSVG (an <img> of the SVG)",
                          lambda policy, value: policy.sanitizer.svg(text(value))),
    "text/vnd.mermaid": Rule("policed", "@jupyterlab/mermaid (mermaid 11.16)",
                             lambda policy, value: mermaid(text(value))),
    "application/vnd.vega.v5+json": Rule("policed", _VEGA_EMBED, **_vega(lite=False)),
    "application/vnd.vegalite.v5+json": Rule("policed", _VEGA_EMBED, **_vega(lite=True)),
    "application/vnd.vegalite.v4+json": Rule("policed", _VEGA_EMBED, **_vega(lite=True)),
    "application/vnd.vegalite.v3+json": Rule("policed", _VEGA_EMBED, **_vega(lite=True)),
    **{f"image/{kind}": Rule("data", _IMAGE, _data(f"image/{kind}")) for kind in ("png", "jpeg", "gif", "webp", "bmp")},
    "application/json": Rule("data", "@jupyterlab/json-extension (a tree of the data)", _data("application/json")),
    "application/vnd.jupyter.widget-view+json": Rule("data", "the ipywidgets manager (a view of a comm model)",
                                                     _data("application/vnd.jupyter.widget-view+json")),
    "application/vnd.e2b.chart+json": Rule("data", "none: E2B's chart data, kept for the API and MCP",
                                           _data("application/vnd.e2b.chart+json")),
    "application/javascript": Rule("script", "rendermime RenderedJavaScript (eval in the page)"),
    "text/javascript": Rule("script", "rendermime RenderedJavaScript"),
    "application/pdf": Rule("refused", "@jupyterlab/pdf-extension (Chromium's PDF viewer, same origin)"),
}
"""The closed list: each type with its rule and the rule's own police function."""

SCRIPT_MIME = re.compile(r"javascript|ecmascript|_exec\b|_exec\.|_load\b|_load\.|xhtml", re.IGNORECASE)
"""Unknown MIME types that carry code for a frontend extension (BokehJS and HoloViews
``*_exec``/``*_load``, ``application/x-javascript``, XHTML): named as scripts in notes, and
framed under ``isolate`` like JavaScript when they are JavaScript."""

IMAGE_METADATA = {"width": (int, float), "height": (int, float), "unconfined": (bool,)}


def rule(mime: str) -> Rule | None:
    """The rule for ``mime``, or None when it is unknown."""
    found = RENDERERS.get(mime)
    if found is None and SCRIPT_MIME.search(mime):
        return Rule("script", "a frontend extension's code")
    return found


def data_value(mime: str, value: Any) -> tuple[Any, bool]:
    """``(value, changed)`` for a ``data`` rule's type: a canonical copy, or ``(None, True)``
    when the value is not of the renderer's kind."""
    if mime == "text/plain":
        return text(value), isinstance(value, list)
    if mime.startswith("image/"):
        value = text(value)
        return (value, False) if _BASE64.fullmatch(value) else (None, True)
    if mime == "application/vnd.jupyter.widget-view+json":
        if not isinstance(value, dict) or not isinstance(value.get("model_id"), str):
            return None, True
        view = {"model_id": value["model_id"]}
        for key in ("version_major", "version_minor"):
            if isinstance(value.get(key), int) and not isinstance(value.get(key), bool):
                view[key] = value[key]
        return view, len(view) != len(value)
    return plain_json(value, frozenset())


def metadata(mime: str, given: Any) -> dict[str, Any] | None:
    """The policy's own output metadata for ``mime`` (from the sandbox's ``given`` only what
    the renderer reads and is of the right type), or None for none."""
    if mime.startswith("application/vnd.vega"):
        return {"embed_options": dict(VEGA_METADATA["embed_options"])}
    if not isinstance(given, dict):
        return None
    if mime.startswith("image/"):
        out = {k: given[k] for k, types in IMAGE_METADATA.items()
               if isinstance(given.get(k), types) and (k == "unconfined" or given[k] > 0)}
        if given.get("needs_background") in ("light", "dark"):
            out["needs_background"] = given["needs_background"]
        return out or None
    if mime == "application/json":
        out = {k: given[k] for k in ("expanded",) if isinstance(given.get(k), bool)}
        if isinstance(given.get("root"), str):
            out["root"] = given["root"]
        return out or None
    return None


def text(value: Any) -> str:
    """A MIME value as text (notebook files may hold multi-line strings as lists)."""
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return value if isinstance(value, str) else str(value)


__all__ = ["RENDERERS", "Rule", "rule", "data_value", "metadata", "text", "SCRIPT_MIME"]

"""What HTML and SVG markup may hold under the output policy, and what counts as active.

The allowlists (:data:`HTML_TAGS`, :data:`HTML_ATTRIBUTES`, :data:`SVG_TAGS`,
:data:`SVG_ATTRIBUTES`) decide what the sanitizer keeps: a closed world. The *active* sets
decide only whether the cell says that the policy removed something that could act or fetch
(its one-line note, and ``isolate``'s frame): an element or attribute the allowlists drop that is
not active (scikit-learn's ``aria-label``, a ``<button>`` without a handler) is dropped without
a word; pandas' ``halign`` is kept.
"""

from __future__ import annotations

import nh3

HTML_TAGS = frozenset(nh3.ALLOWED_TAGS) - {"map", "area", "wbr"} | {"style", "font", "tfoot", "label", "input"}
"""ammonia's defaults and what data tools emit, less image maps and ``<wbr>`` (MathJax joins the
text on both sides of a ``<wbr>``, so ``\\<wbr>style`` would become ``\\style`` after policing).
``<input>`` only as a check box or radio button (no form, no handler: scikit-learn's estimator
diagrams open and close with them; :mod:`.passes` removes every other input)."""
_TABLE_ATTRS = {"border", "cellpadding", "cellspacing", "align", "valign", "halign", "colspan", "rowspan", "scope",
                "headers", "width", "height", "bgcolor", "nowrap"}
HTML_ATTRIBUTES: dict[str, set[str]] = {
    **{tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items()},
    "*": {"class", "id", "style", "title", "lang", "dir", "align", "hidden"},
    "a": {"href", "hreflang"},
    "img": {"src", "alt", "width", "height", "align"},
    "style": {"type", "media", "scoped"},
    "font": {"color", "face", "size"},
    "label": {"for"},
    "input": {"type", "checked", "disabled", "name", "value"},
    **{tag: set(nh3.ALLOWED_ATTRIBUTES.get(tag, ())) | _TABLE_ATTRS
       for tag in ("table", "thead", "tbody", "tfoot", "tr", "td", "th", "col", "colgroup", "caption")},
}
"""Per tag (``*``: every tag). ``halign`` is pandas' own (multi-level column headers): inert."""

SVG_TAGS = frozenset({
    "svg", "g", "defs", "symbol", "use", "title", "desc", "metadata", "style", "path", "rect", "circle",
    "ellipse", "line", "polyline", "polygon", "text", "tspan", "textPath", "clipPath", "mask", "pattern",
    "marker", "linearGradient", "radialGradient", "stop", "image", "a", "switch", "filter", "feGaussianBlur",
    "feOffset", "feBlend", "feColorMatrix", "feComposite", "feFlood", "feMerge", "feMergeNode", "feMorphology",
})
SVG_ATTRIBUTES: dict[str, set[str]] = {"*": {
    "id", "class", "style", "transform", "viewBox", "width", "height", "x", "y", "x1", "y1", "x2", "y2", "cx",
    "cy", "r", "rx", "ry", "d", "points", "fill", "fill-opacity", "fill-rule", "stroke", "stroke-width",
    "stroke-opacity", "stroke-linecap", "stroke-linejoin", "stroke-dasharray", "stroke-dashoffset",
    "stroke-miterlimit", "opacity", "clip-path", "clip-rule", "clipPathUnits", "mask", "font-family",
    "font-size", "font-weight", "font-style", "text-anchor", "dominant-baseline", "alignment-baseline",
    "letter-spacing", "dx", "dy", "rotate", "offset", "stop-color", "stop-opacity", "gradientUnits",
    "gradientTransform", "patternUnits", "patternTransform", "preserveAspectRatio", "version", "xmlns",
    "xlink", "href", "markerWidth", "markerHeight", "refX", "refY", "orient", "markerUnits", "stdDeviation",
    "in", "in2", "result", "mode", "operator", "values", "type", "visibility", "display", "overflow",
    "vector-effect", "shape-rendering", "text-rendering", "color", "filter", "filterUnits", "lang",
}}
INLINE_SVG_ATTRIBUTES: dict[str, set[str]] = {
    **{tag: set(SVG_ATTRIBUTES["*"]) for tag in SVG_TAGS},
    **{tag: set(attrs) | (SVG_ATTRIBUTES["*"] if tag in SVG_TAGS else set()) for tag, attrs in HTML_ATTRIBUTES.items()},
}
"""HTML with inline ``<svg>``: each SVG element takes the SVG attributes, each HTML element its own."""

ACTIVE_TAGS = frozenset({"script", "iframe", "object", "embed", "link", "meta", "base", "form", "frame", "frameset",
                         "applet", "video", "audio", "source", "track", "picture", "portal", "math", "foreignObject",
                         "animate", "set", "feImage", "animateTransform", "animateMotion", "noscript", "template",
                         "marquee", "image"})
"""Elements that run, load, navigate or re-parse (mXSS) by what they are, whatever their attributes."""
ACTIVE_ATTRIBUTES = frozenset({
    "href", "src", "srcset", "xlink:href", "action", "formaction", "background", "poster", "data", "lowsrc", "dynsrc",
    "ping", "cite", "longdesc", "codebase", "archive", "classid", "manifest", "imagesrcset", "srcdoc", "http-equiv",
    "target", "formtarget", "is", "popovertarget", "commandfor", "command", "attributename", "to", "from", "values",
    "by", "begin", "autofocus", "form"})
"""Attributes that fetch, navigate, bind behaviour or animate other attributes (and ``on*``,
``data-commandlinker-*``: :func:`active_attribute`)."""
NOT_ELEMENTS = frozenset({"html", "head", "body", "?xml", "!doctype"})
"""Names a fragment parser drops without a trace."""


def active_attribute(name: str) -> bool:
    """Whether dropping attribute ``name`` removed something that could act or fetch."""
    name = name.lower()
    return name.startswith(("on", "data-commandlinker", "data-jp-")) or name in ACTIVE_ATTRIBUTES


def allowed(attributes: dict[str, set[str]], tag: str, attr: str) -> bool:
    """Whether an allowlist keeps attribute ``attr`` on ``tag``."""
    return attr in attributes.get("*", ()) or attr in attributes.get(tag, ())


__all__ = ["HTML_TAGS", "HTML_ATTRIBUTES", "SVG_TAGS", "SVG_ATTRIBUTES", "INLINE_SVG_ATTRIBUTES", "ACTIVE_TAGS",
           "ACTIVE_ATTRIBUTES", "NOT_ELEMENTS", "active_attribute", "allowed"]

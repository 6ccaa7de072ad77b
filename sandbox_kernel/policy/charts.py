"""Chart specs (Vega, Vega-Lite, Plotly) under the output policy: plain data, no URLs.

JupyterLab 4.6 draws ``application/vnd.vega.v5+json`` and ``application/vnd.vegalite.v*+json``
with vega-embed 6.21 (Vega 5, Vega-Lite 5). It fetches whatever a spec names: ``data.url``, an
image mark's ``url``, a lookup's ``from.data.url``, whatever their form (a string, or a
``{"signal": ...}``, ``{"value": ...}`` or ``{"field": ...}`` that computes one). It merges
``usermeta.embedOptions`` from the spec into its options (a ``loader``, ``config``/``patch``
URLs), and the output's metadata ``embed_options`` too (``defaultStyle`` becomes a ``<style>``
in the page's head; ``editorUrl`` and "View Source" act on a click). A string where the spec
should be is itself fetched as a URL.

vega-embed's default tooltip handler (vega-tooltip) writes a data object's ``image`` field as
``<img src=...>`` into the page (``"tooltip": {"content": "data"}``, Altair's
``tooltip=["image"]``, or a value an expression builds): every pass of the mouse fetches it.
Vega's own handler, which ``"tooltip": false`` leaves in place, sets the chart's ``title``
attribute to plain text. A click on a mark with an ``href`` makes a link without a target in
JupyterLab 4.6 (its loader sets none, and no option from the output can): the Lab tab itself
navigates, so ``href`` goes (like an HTML link with ``target="_top"``). ``cursor`` stays when it
is a CSS keyword (``"pointer"``), never a value that could be ``url(...)``. A Vega spec without
marks or without a size (a width and a height in pixels) can draw nothing of size: JupyterLab's
renderer then spins and its tab stops answering (measured: ``{}``, data or signals only, a bare
group, rect or empty text mark), so it is refused.

So a spec is rebuilt from JSON values only (dicts with string keys, lists, strings, numbers,
booleans, null), without the keys of :data:`VEGA_DROPPED`, whatever their value; a spec that is
not an object, or a Vega spec without marks, is refused; and the output's metadata for the type
is the policy's own, ``{"embed_options": {"actions": false, "tooltip": false}}`` (no action
menu: no "View Source", no editor; tooltips as text).

Plotly (``application/vnd.plotly.v1+json``) is drawn by the extension the ``plotly`` package
ships, not by JupyterLab itself, so it is dropped unless the user allows it by name; then it
loses :data:`PLOTLY_DROPPED` keys (``layout.images[].source``, map styles and layers, topojson),
every string that names another origin, and the markup of its labels is limited to plotly's
own tags without attributes.
"""

from __future__ import annotations

import math
import re
from typing import Any

import nh3

VEGA_DROPPED = frozenset({"url", "href", "cursor", "usermeta", "loader", "baseURL", "element", "$schema"})
"""Keys removed anywhere in a Vega or Vega-Lite spec (``$schema`` is written back by
:func:`vega_spec` when it is Vega's own; ``cursor`` stays when :func:`cursor_ok`)."""
CURSORS = frozenset("""auto default none context-menu help pointer progress wait cell crosshair text vertical-text alias
copy move no-drop not-allowed grab grabbing e-resize n-resize ne-resize nw-resize s-resize se-resize sw-resize
w-resize ew-resize ns-resize nesw-resize nwse-resize col-resize row-resize all-scroll zoom-in zoom-out""".split())
"""CSS cursor keywords (CSS UI 4): the only cursors a chart keeps."""
VEGA_LITE_VIEWS = frozenset({"mark", "layer", "concat", "hconcat", "vconcat", "facet", "repeat", "spec"})
"""Top-level keys of a Vega-Lite spec that draw something."""
PLOTLY_DROPPED = frozenset({"source", "url", "href", "topojsonURL", "topojson", "style", "mapboxAccessToken",
                            "accesstoken", "sourcetype", "layers", "templateitemname"})
_SCHEMA = re.compile(r"https://vega\.github\.io/schema/(vega|vega-lite)/v\d+(?:\.\d+){0,2}\.json")
_OTHER_ORIGIN = re.compile(r"(?i)(?:^|[^a-z0-9+.-])(?:[a-z][a-z0-9+.-]*:)?//|url\(|\bdata:|javascript:")
_PLOTLY_TAGS = {"b", "i", "em", "strong", "br", "sub", "sup", "span", "s", "u"}
_PLOTLY_LABEL = nh3.Cleaner(tags=_PLOTLY_TAGS, attributes={}, url_schemes=set(), link_rel=None,
                            strip_comments=True)

VEGA_METADATA = {"embed_options": {"actions": False, "tooltip": False}}


def cursor_ok(key: str, value: Any) -> bool:
    """Whether a ``cursor`` is a keyword, as a string or ``{"value": keyword}``."""
    if isinstance(value, dict) and list(value) == ["value"]:
        value = value["value"]
    return key == "cursor" and isinstance(value, str) and value in CURSORS


def plain_json(value: Any, dropped: frozenset[str], depth: int = 0, rows: frozenset[str] = frozenset()) \
        -> tuple[Any, bool]:
    """``(copy, changed)``: ``value`` rebuilt from JSON values only, without keys in
    ``dropped`` (but a keyword ``cursor``: :func:`cursor_ok`), except under a key in ``rows``
    (inline data rows, where a column may be named ``url``: only a dropped channel could make a
    renderer fetch it); anything else (a non-finite float, another type) becomes None, and
    nesting deeper than 100 levels goes."""
    if depth > 100:
        return None, True
    if isinstance(value, dict):
        out, changed = {}, False
        for key, item in value.items():
            if not isinstance(key, str) or (key in dropped and not cursor_ok(key, item)):
                changed = True
                continue
            inner = frozenset() if key in rows else dropped
            out[key], did = plain_json(item, inner, depth + 1, rows)
            changed |= did
        return out, changed
    if isinstance(value, (list, tuple)):
        items = [plain_json(v, dropped, depth + 1, rows) for v in value]
        return [v for v, _ in items], any(d for _, d in items) or isinstance(value, tuple)
    if value is None or isinstance(value, (bool, int, str)):
        return value, False
    if isinstance(value, float):
        return (value, False) if math.isfinite(value) else (None, True)
    return None, True


def vega_refusal(spec: Any, lite: bool) -> str | None:
    """Why a Vega (or, ``lite``, Vega-Lite) spec is refused, or None: not an object (vega-embed
    would fetch a string as a URL), or nothing of size to draw (a Vega spec without marks or
    without a width and a height hangs JupyterLab's renderer)."""
    if not isinstance(spec, dict):
        return "a chart spec that is not an object is a URL to vega-embed"
    if lite and not VEGA_LITE_VIEWS & set(spec):
        return "a Vega-Lite spec without a mark or a view draws nothing"
    if not lite and not (isinstance(spec.get("marks"), list) and spec["marks"] and _positive(spec.get("width"))
                         and _positive(spec.get("height"))):
        return ("a Vega spec without marks, or without a width and a height in pixels, can lay out nothing, and then "
                "JupyterLab's chart renderer stops its tab")
    return None


def _positive(size: Any) -> bool:
    return isinstance(size, (int, float)) and not isinstance(size, bool) and 0 < size < 100_000


def vega_spec(spec: Any, lite: bool = True) -> tuple[dict[str, Any] | None, bool]:
    """``(spec, changed)`` for a Vega-Lite (``lite``) or Vega spec; ``(None, True)`` when
    :func:`vega_refusal` refuses it."""
    if vega_refusal(spec, lite) is not None:
        return None, True
    out, changed = plain_json({k: v for k, v in spec.items() if k != "$schema"}, VEGA_DROPPED,
                              rows=frozenset({"values", "datasets"}))
    schema = spec.get("$schema")
    if isinstance(schema, str) and _SCHEMA.fullmatch(schema):
        out = {"$schema": schema, **out}
    elif "$schema" in spec:
        changed = True
    return out, changed


def plotly_figure(figure: Any) -> tuple[dict[str, Any] | None, bool]:
    """``(figure, changed)`` for a Plotly figure (``{"data": [...], "layout": {...}, ...}``)."""
    if not isinstance(figure, dict):
        return None, True
    out, changed = plain_json(figure, PLOTLY_DROPPED)
    out, did = _plotly_strings(out)
    return out, changed or did


def _plotly_strings(value: Any) -> tuple[Any, bool]:
    if isinstance(value, dict):
        items = {k: _plotly_strings(v) for k, v in value.items()}
        return {k: v for k, (v, _) in items.items()}, any(d for _, d in items.values())
    if isinstance(value, list):
        items = [_plotly_strings(v) for v in value]
        return [v for v, _ in items], any(d for _, d in items)
    if isinstance(value, str):
        if _OTHER_ORIGIN.search(value):
            return "", True
        if "<" in value or "&" in value:
            clean = _PLOTLY_LABEL.clean(value)
            return clean, clean != value
    return value, False


__all__ = ["plain_json", "vega_spec", "vega_refusal", "plotly_figure", "cursor_ok", "VEGA_METADATA", "VEGA_DROPPED",
           "PLOTLY_DROPPED", "CURSORS"]

"""Sanitizers for the sandbox's HTML, SVG, CSS and Markdown outputs (the ``sanitize`` policy).

JupyterLab trusts the outputs of every cell the user runs: their scripts and event handlers
run with the page's Jupyter credentials, and the images they reference are fetched by the
user's browser (a way out for a sandbox with no network). These functions make such outputs
inert while keeping what data tools emit (pandas and Styler tables, bold, inline ``data:``
images, matplotlib SVG):

- HTML through nh3 (the binding to the Rust ``ammonia`` sanitizer) with an allowlist of tags
  and attributes; every URL attribute is checked here (:meth:`Sanitizer.url_ok`): links may
  be ``http(s)``, ``mailto``, relative or ``#fragment`` (opened in a new tab, ``rel="noopener
  noreferrer"``), images only ``data:image/...`` or an allowed origin. Nothing else makes the
  browser fetch by itself.
- CSS (``<style>`` blocks and ``style`` attributes) through tinycss2: declarations that load
  anything (``url()``, ``image-set()``, ``@import``, ``@font-face``) or run anything
  (``expression()``, ``behavior``, ``-moz-binding``) are dropped.
- Markdown: rendered with markdown-it-py and sanitized as HTML when it holds HTML, links or
  images (JupyterLab's Markdown renderer does not sanitize trusted output); plain Markdown
  passes unchanged, so its maths and look stay the frontend's.

Each function returns ``(clean, changed)``; ``changed`` is False when nothing active was
removed (normalization alone, e.g. quoting, does not count).
"""

from __future__ import annotations

import functools
import html as html_lib
import re
from urllib.parse import urlsplit

import nh3
import tinycss2

# -- allowlists ----------------------------------------------------------------------------
HTML_TAGS = frozenset(nh3.ALLOWED_TAGS) | {"style", "font", "tfoot", "label"}
_TABLE_ATTRS = {"border", "cellpadding", "cellspacing", "align", "valign", "colspan", "rowspan", "scope",
                "headers", "width", "height", "bgcolor", "nowrap"}
HTML_ATTRIBUTES: dict[str, set[str]] = {
    **{tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items()},
    "*": {"class", "id", "style", "title", "lang", "dir", "align"},
    "a": {"href", "hreflang", "name"},
    "img": {"src", "alt", "width", "height", "align"},
    "style": {"type", "media", "scoped"},
    "font": {"color", "face", "size"},
    **{tag: set(nh3.ALLOWED_ATTRIBUTES.get(tag, ())) | _TABLE_ATTRS
       for tag in ("table", "thead", "tbody", "tfoot", "tr", "td", "th", "col", "colgroup", "caption")},
}

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

_NAMESPACES = {"xmlns": "http://www.w3.org/2000/svg", "xlink": "http://www.w3.org/1999/xlink"}
_URL_ATTRS = {"href", "src"}
_DATA_IMAGE = re.compile(r"^data:image/(png|jpeg|jpg|gif|webp|bmp|avif|svg\+xml)[;,]", re.IGNORECASE)
_LINK_SCHEMES = {"http", "https", "mailto"}
# CSS that fetches or runs something. A declaration holding one of these is dropped.
_CSS_FUNCTIONS = {"url", "image", "image-set", "-webkit-image-set", "cross-fade", "element", "expression", "src",
                  "paint"}
_CSS_PROPERTIES = {"behavior", "-moz-binding", "-ms-behavior"}
_CSS_AT_RULES = {"media", "supports", "container", "layer"}  # kept, their contents cleaned
_STYLE_BLOCK = re.compile(r"(<style\b[^>]*>)(.*?)(</style>)", re.IGNORECASE | re.DOTALL)


class Sanitizer:
    """HTML, SVG, CSS and Markdown sanitizing with one set of allowed origins.

    Args:
        allowed_origins: origins (``"https://cdn.example.org"``) whose images may load;
            empty (the default): only inline ``data:`` images.
    """

    def __init__(self, allowed_origins: tuple[str, ...] | list[str] = ()) -> None:
        self.allowed_origins = frozenset(_origin(o) for o in allowed_origins if o)
        common = dict(attribute_filter=self._attribute, strip_comments=True, link_rel="noopener noreferrer",
                      url_schemes={"http", "https", "mailto", "data"}, clean_content_tags={"script"})
        self._html = nh3.Cleaner(tags=set(HTML_TAGS), attributes=HTML_ATTRIBUTES,
                                 set_tag_attribute_values={"a": {"target": "_blank"}}, **common)
        self._svg = nh3.Cleaner(tags=set(SVG_TAGS), attributes=SVG_ATTRIBUTES, **common)
        # The reference for "changed": the same parser and serializer, nothing removed.
        self._keep_all = nh3.Cleaner(tags=set(HTML_TAGS | SVG_TAGS | _ACTIVE_TAGS), clean_content_tags=set(),
                                     generic_attribute_prefixes={""}, strip_comments=True,
                                     link_rel="noopener noreferrer", url_schemes=_ALL_SCHEMES,
                                     set_tag_attribute_values={"a": {"target": "_blank"}})

    # -- URLs ------------------------------------------------------------------------------
    def url_ok(self, tag: str, attr: str, url: str) -> bool:
        """Whether ``url`` may stay in attribute ``attr`` of ``tag``: links are navigation a
        person chooses; everything else the browser would fetch by itself, so it must be inline
        (``data:image/...``) or from an allowed origin. SVG ``<use>`` may only point inside
        the document."""
        url = url.strip()
        if tag == "use":
            return url.startswith("#")
        if tag in ("a", "area"):
            scheme = urlsplit(url).scheme.lower()
            return not scheme or scheme in _LINK_SCHEMES
        if _DATA_IMAGE.match(url):
            return True
        return self._allowed_origin(url)

    def _allowed_origin(self, url: str) -> bool:
        return bool(self.allowed_origins) and _origin(url) in self.allowed_origins

    def _attribute(self, tag: str, attr: str, value: str) -> str | None:
        if attr in _URL_ATTRS:
            return value if self.url_ok(tag, attr, value) else None
        if attr in _NAMESPACES:
            return value if value == _NAMESPACES[attr] else None
        if attr == "style":
            return clean_declarations(value)[0]
        return value

    # -- HTML, SVG, Markdown ----------------------------------------------------------------
    def html(self, source: str) -> tuple[str, bool]:
        """``(clean_html, changed)`` for an HTML fragment (``text/html``)."""
        return self._clean(self._html, source)

    def svg(self, source: str) -> tuple[str, bool]:
        """``(clean_svg, changed)`` for an SVG document (``image/svg+xml``); the XML
        declaration and doctype go, the ``<svg>`` element and its namespaces stay."""
        clean, changed = self._clean(self._svg, source)
        return clean.strip(), changed

    def markdown(self, source: str) -> tuple[str | None, bool]:
        """``(clean_html, changed)`` for Markdown: ``(None, False)`` when it holds no HTML,
        link or image (it can then be shown as Markdown); else its rendering as clean HTML."""
        if not _MARKDOWN_ACTIVE.search(source):
            return None, False
        return self.html(render_markdown(source))

    def _clean(self, cleaner: nh3.Cleaner, source: str) -> tuple[str, bool]:
        clean = _clean_style_blocks(cleaner.clean(source))
        if _same_but_spacing(source, clean) or not _maybe_active(source):
            return clean, False
        return clean, clean != _clean_style_blocks(self._keep_all.clean(source), keep=True)


def _same_but_spacing(source: str, clean: str) -> bool:
    """Whether the sanitizer only re-spaced ``source`` (and wrote boolean attributes as
    ``name=""``): then it removed nothing. The common case for data tools' HTML, checked in
    a few ms a MB."""
    return len(clean) >= len(source) - len(source) // 8 and \
        "".join(source.split()) == "".join(clean.split()).replace('=""', "")


# Tags removed by the sanitizer (with their attributes) that the "changed" reference keeps.
_ACTIVE_TAGS = frozenset({"script", "iframe", "object", "embed", "link", "meta", "base", "form", "input", "button",
                          "textarea", "select", "option", "frame", "frameset", "applet", "video", "audio", "source",
                          "track", "picture", "portal", "math", "foreignObject", "animate", "set", "feImage",
                          "animateTransform", "animateMotion", "noscript", "template", "dialog", "marquee"})
_ALL_SCHEMES = {"http", "https", "mailto", "data", "javascript", "vbscript", "file", "ftp", "blob", "ws", "wss"}
_ACTIVE_NEEDLES = (
    *(f"<{tag}" for tag in ("script", "iframe", "object", "embed", "link", "meta", "base", "form", "input", "button",
                           "textarea", "select", "frame", "applet", "svg", "math", "video", "audio", "source",
                           "picture", "portal", "use", "image", "animate", "set", "foreignobject", "feimage",
                           "noscript", "template", "dialog", "marquee", "!--", "?")),
    "javascript:", "vbscript:", "data:", "url(", "@", "srcset", "src=", "href", "action", "background",
    "commandlinker", "expression(", "binding", "behavior",
)
_HANDLER = re.compile(r"on[a-z]+\s*=")


def _maybe_active(source: str) -> bool:
    """Cheap pre-check (substring searches, ~1 ms a MB): text with none of these loses nothing
    active to the sanitizer, so the second, comparing pass is skipped."""
    low = source.lower()
    return any(needle in low for needle in _ACTIVE_NEEDLES) or _HANDLER.search(low) is not None


_MARKDOWN_ACTIVE = re.compile(r"<|\]\(|\]:")


def _origin(url: str) -> str:
    parts = urlsplit(url.strip())
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}" if parts.scheme and parts.netloc else ""


def _clean_style_blocks(html: str, keep: bool = False) -> str:
    """Clean the CSS of every ``<style>`` block in sanitized ``html`` (nh3 keeps its text)."""
    if "<style" not in html:
        return html
    return _STYLE_BLOCK.sub(lambda m: m.group(1) + (m.group(2) if keep else clean_stylesheet(m.group(2))[0])
                            + m.group(3), html)


@functools.lru_cache(maxsize=1)
def _markdown_renderer():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def render_markdown(source: str) -> str:
    """Markdown (CommonMark, tables, strikethrough) as HTML, unsanitized."""
    return _markdown_renderer().render(source)


# -- CSS ----------------------------------------------------------------------------------
def _active(tokens) -> bool:
    """Whether CSS component values load or run something."""
    for token in tokens or ():
        if token.type in ("url", "error"):  # a parse error (e.g. a bad url token) is never kept
            return True
        if token.type == "function" and token.lower_name in _CSS_FUNCTIONS:
            return True
        if token.type == "ident" and token.lower_value in ("expression",):
            return True
        if getattr(token, "arguments", None) is not None and _active(token.arguments):
            return True
        if getattr(token, "content", None) is not None and not isinstance(token.content, str) \
                and _active(token.content):
            return True
    return False


def clean_declarations(css: str) -> tuple[str, bool]:
    """``(clean, changed)`` for a ``style`` attribute's declarations."""
    nodes = tinycss2.parse_blocks_contents(css)
    kept = [n for n in nodes if _declaration_ok(n)]
    if len(kept) == len(nodes):
        return css, False
    return "; ".join(tinycss2.serialize([n]).strip().rstrip(";") for n in kept if n.type == "declaration"), True


def _declaration_ok(node) -> bool:
    if node.type in ("whitespace", "comment"):
        return True
    if node.type != "declaration":  # nested rules and parse errors have no place in an attribute
        return False
    return node.lower_name not in _CSS_PROPERTIES and not _active(node.value)


def clean_stylesheet(css: str) -> tuple[str, bool]:
    """``(clean, changed)`` for a ``<style>`` block: rules keep their safe declarations;
    ``@import``, ``@font-face`` and other at-rules go (``@media``/``@supports`` are cleaned)."""
    nodes = tinycss2.parse_stylesheet(css)
    kept, changed = _clean_rules(nodes)
    if not changed:
        return css, False
    return tinycss2.serialize(kept), True


def _clean_rules(nodes) -> tuple[list, bool]:
    kept, changed = [], False
    for node in nodes:
        if node.type in ("whitespace", "comment"):
            kept.append(node)
        elif node.type == "qualified-rule":
            if _active(node.prelude):
                changed = True
                continue
            body = tinycss2.parse_blocks_contents(node.content)
            good = [n for n in body if _declaration_ok(n) or (n.type == "qualified-rule" and not _active(n.content))]
            if len(good) != len(body):
                changed = True
                node.content = _tokens(good)
            kept.append(node)
        elif node.type == "at-rule" and node.lower_at_keyword in _CSS_AT_RULES and node.content is not None \
                and not _active(node.prelude):
            inner, inner_changed = _clean_rules(tinycss2.parse_stylesheet(tinycss2.serialize(node.content)))
            if inner_changed:
                changed = True
                node.content = _tokens(inner)
            kept.append(node)
        else:
            changed = True
    return kept, changed


def _tokens(nodes) -> list:
    """Nodes as component values again (for a rule's ``content``), ``;`` after declarations."""
    text = "".join(tinycss2.serialize([n]).rstrip(";") + (";" if n.type == "declaration" else "") for n in nodes)
    return tinycss2.parse_component_value_list(text)


def escape_attribute(value: str) -> str:
    """``value`` quoted for an HTML attribute (``srcdoc``)."""
    return html_lib.escape(value, quote=True)

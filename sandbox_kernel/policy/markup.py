"""HTML, SVG and Markdown under the ``sanitize`` policy: what reaches the page is always ours.

JupyterLab trusts the outputs of every cell the user runs: their scripts and event handlers
run with the page's Jupyter credentials, the images they name are fetched by the user's
browser (a way out for a sandbox with no network), and MathJax typesets the maths in them.
So the output is always *written by this module*, never the input passed along because
"nothing changed" (DOMPurify and ammonia re-serialize always, for the same reason):

- HTML goes through nh3 (the binding to the Rust ``ammonia`` sanitizer, html5ever's parser
  and serializer) with an allowlist of tags and attributes. Every URL attribute is checked
  (:meth:`Sanitizer.url_ok`): links may be ``http(s)``, ``mailto``, relative or
  ``#fragment`` (opened in a new tab, ``rel="noopener noreferrer"``), images only
  ``data:image/...`` or an allowed origin. ``id`` values must hold a digit or ``-`` (so an
  output cannot name a window global such as ``MathJax``: DOM clobbering).
- CSS in ``<style>`` blocks and ``style`` attributes is rewritten by :mod:`.css` (an
  allowlist, its own serializer: no ``url()``, no ``</style>``).
- The maths MathJax would typeset in the text (outside ``pre``/``code``, as MathJax skips
  them) loses every macro :mod:`.tex` does not list.
- Markdown is always rendered here (markdown-it-py, CommonMark with tables and strikethrough;
  its maths set aside first, as JupyterLab's ``removeMath`` does) and then cleaned as HTML.

Each function returns ``(clean, changed)``; ``changed`` says whether anything active was
removed, compared with the same parser and serializer keeping everything (normalization
alone, e.g. quoting, does not count). It decides the cell's one-line note and, under
``isolate``, whether the original is shown in a frame. It never decides what is emitted.
"""

from __future__ import annotations

import functools
import html as html_lib
import re
from urllib.parse import urlsplit

import nh3

from . import css
from .tex import police_tex, typeset

# -- allowlists ----------------------------------------------------------------------------
HTML_TAGS = frozenset(nh3.ALLOWED_TAGS) - {"map", "area", "wbr"} | {"style", "font", "tfoot", "label"}
"""ammonia's defaults and what data tools emit, less image maps and ``<wbr>`` (MathJax joins the
text on both sides of a ``<wbr>``, so ``\\<wbr>style`` would become ``\\style`` after policing)."""
_TABLE_ATTRS = {"border", "cellpadding", "cellspacing", "align", "valign", "colspan", "rowspan", "scope",
                "headers", "width", "height", "bgcolor", "nowrap"}
HTML_ATTRIBUTES: dict[str, set[str]] = {
    **{tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items()},
    "*": {"class", "id", "style", "title", "lang", "dir", "align"},
    "a": {"href", "hreflang"},
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
_SVG_PAINT = frozenset({"fill", "stroke", "clip-path", "mask", "filter", "marker-start", "marker-mid", "marker-end"})
"""SVG presentation attributes that take ``url(...)``: only ``url(#local)`` is kept."""

_NAMESPACES = {"xmlns": "http://www.w3.org/2000/svg", "xlink": "http://www.w3.org/1999/xlink"}
_URL_ATTRS = {"href", "src", "cite"}
_DATA_IMAGE = re.compile(r"^data:image/(png|jpeg|jpg|gif|webp|bmp|avif)[;,]", re.IGNORECASE)
_LINK_SCHEMES = {"http", "https", "mailto"}
_ID = re.compile(r"[A-Za-z][\w.:-]*[-\d][\w.:-]*")
_LOCAL_PAINT = re.compile(r"\s*url\(\s*#[\w.:-]+\s*\)\s*|[^()]*")
_STYLE_START = re.compile(r"<style\b(?:[^\">]|\"[^\"]*\")*>")
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9:-]*)(?:[^\">]|\"[^\"]*\")*>")
_ANY_STYLE = re.compile(r"(?<=>)[^<]*(?=</style>)", re.IGNORECASE)
_SOURCE_TAG = re.compile(r"<([a-zA-Z][a-zA-Z0-9-]*)[\s/>]")
_SVG_TAGS_LOWER = frozenset(t.lower() for t in SVG_TAGS) | {"?xml", "!doctype"}
_MATH_SKIP = frozenset({"pre", "code", "style", "textarea", "script", "noscript", "annotation", "annotation-xml"})
"""Elements whose text MathJax does not typeset (its ``skipHtmlTags``), unless they carry its
``processHtmlClass`` (``mathjax_process``): so class names holding ``jax`` are removed."""


class Sanitizer:
    """HTML, SVG and Markdown cleaning with one set of allowed origins.

    Args:
        allowed_origins: origins (``"https://cdn.example.org"``) whose images may load;
            empty (the default): only inline ``data:`` images.
    """

    def __init__(self, allowed_origins: tuple[str, ...] | list[str] = ()) -> None:
        self.allowed_origins = frozenset(_origin(o) for o in allowed_origins if o)
        common = dict(strip_comments=True, link_rel="noopener noreferrer",
                      url_schemes={"http", "https", "mailto", "data"}, clean_content_tags={"script"})
        self._html = nh3.Cleaner(tags=set(HTML_TAGS), attributes=HTML_ATTRIBUTES, attribute_filter=self._attribute,
                                 set_tag_attribute_values={"a": {"target": "_blank"}}, **common)
        self._svg = nh3.Cleaner(tags=set(SVG_TAGS), attributes=SVG_ATTRIBUTES, attribute_filter=self._attribute,
                                **common)
        # The reference for "changed": the same parser and serializer, nothing removed.
        self._keep_all = nh3.Cleaner(tags=set(HTML_TAGS | SVG_TAGS | _ACTIVE_TAGS), clean_content_tags=set(),
                                     generic_attribute_prefixes={""}, strip_comments=True,
                                     link_rel="noopener noreferrer", url_schemes=_ALL_SCHEMES,
                                     attribute_filter=_reference_attribute,
                                     set_tag_attribute_values={"a": {"target": "_blank"}})

    # -- URLs ------------------------------------------------------------------------------
    def url_ok(self, tag: str, attr: str, url: str) -> bool:
        """Whether ``url`` may stay in attribute ``attr`` of ``tag``: links are navigation a
        person chooses; everything else the browser would fetch by itself, so it must be inline
        (``data:image/...``, not SVG) or from an allowed origin. SVG ``<use>`` may only point
        inside the document."""
        url = url.strip()
        if tag == "use":
            return url.startswith("#")
        if tag == "a" or attr == "cite":
            scheme = urlsplit(url).scheme.lower()
            return not scheme or scheme in _LINK_SCHEMES
        if _DATA_IMAGE.match(url):
            return True
        return self.allowed_origin(url)

    def allowed_origin(self, url: str) -> bool:
        """Whether ``url`` is on one of the allowed origins (scheme, host and port)."""
        return bool(self.allowed_origins) and _origin(url) in self.allowed_origins

    def _attribute(self, tag: str, attr: str, value: str) -> str | None:
        if attr in _URL_ATTRS:
            return value if self.url_ok(tag, attr, value) else None
        if attr in _NAMESPACES:
            return value if value == _NAMESPACES[attr] else None
        if attr == "style":
            return css.clean_declarations(value)[0]
        if attr == "id":
            return value if _ID.fullmatch(value) else None
        if attr == "class":
            return " ".join(token for token in value.split() if "jax" not in token.lower()) or None
        if attr in _SVG_PAINT and "(" in value:
            return value if _LOCAL_PAINT.fullmatch(value) else None
        return value

    # -- HTML, SVG, Markdown ----------------------------------------------------------------
    def html(self, source: str) -> tuple[str, bool]:
        """``(clean_html, changed)`` for an HTML fragment (``text/html``, widget innerHTML)."""
        clean = _rewrite(self._html.clean(source), keep_all=False)
        return clean, self._changed(source, clean)

    def svg(self, source: str) -> tuple[str, bool]:
        """``(clean_svg, changed)`` for an SVG document (``image/svg+xml``); the XML
        declaration and doctype go, the ``<svg>`` element and its namespaces stay."""
        clean = _rewrite(self._svg.clean(source), keep_all=False, maths=False).strip()
        return clean, self._changed(source, clean, _SVG_TAGS_LOWER)

    def markdown(self, source: str) -> tuple[str, bool]:
        """``(clean_html, changed)`` for Markdown, rendered by :func:`render_markdown`. A
        ```` ```mermaid ```` fence, which JupyterLab's own renderer would draw, is shown as code:
        that counts as a change (the cell says so)."""
        html, changed = self.html(render_markdown(source))
        return html, changed or _MERMAID_FENCE.search(source) is not None

    def _changed(self, source: str, clean: str, tags: frozenset[str] = HTML_TAGS) -> bool:
        if _same_but_spacing(source, clean):
            return False
        if any(name.lower() not in tags for name in _SOURCE_TAG.findall(source)):
            return True  # an element the reference does not know either (a custom element)
        return clean.strip() != _rewrite(self._keep_all.clean(source), keep_all=True).strip()


def _reference_attribute(tag: str, attr: str, value: str) -> str | None:
    return css.clean_declarations(value, keep_all=True)[0] if attr == "style" else value


def _same_but_spacing(source: str, clean: str) -> bool:
    """Whether the sanitizer only re-spaced ``source`` (and wrote boolean attributes as
    ``name=""``), and its ``<style>`` blocks lost nothing: then it removed nothing. The common
    case for data tools' HTML (pandas, Styler), checked in a few ms a MB; it only spares the
    comparing pass."""
    if len(clean) < len(source) - len(source) // 8:
        return False
    if "<style" in source:
        blocks = _ANY_STYLE.findall(source)
        if any(css.clean_stylesheet(block)[1] for block in blocks):
            return False
        source, clean = _ANY_STYLE.sub("", source), _ANY_STYLE.sub("", clean)
    return "".join(source.split()).replace(';"', '"') == "".join(clean.split()).replace('=""', "")


# Tags removed by the sanitizer (with their attributes) that the "changed" reference keeps.
_ACTIVE_TAGS = frozenset({"script", "iframe", "object", "embed", "link", "meta", "base", "form", "input", "button",
                          "textarea", "select", "option", "frame", "frameset", "applet", "video", "audio", "source",
                          "track", "picture", "portal", "math", "foreignObject", "animate", "set", "feImage",
                          "animateTransform", "animateMotion", "noscript", "template", "dialog", "marquee"})
_ALL_SCHEMES = {"http", "https", "mailto", "data", "javascript", "vbscript", "file", "ftp", "blob", "ws", "wss"}


def _rewrite(markup: str, *, keep_all: bool, maths: bool = True) -> str:
    """nh3's serialization with each ``<style>`` block's CSS rewritten by :mod:`.css` and, when
    MathJax would typeset something, the maths of its text policed (:mod:`.tex`).

    nh3 escapes ``<`` and ``>`` in text and in attribute values, so in its output a ``<`` starts
    a tag, except inside a ``<style>`` element (raw text, which cannot hold ``</style``)."""
    if "<style" in markup:
        markup = _rewrite_styles(markup, keep_all)
    # ammonia writes its two link attributes in either order (rel first when it dropped the
    # href itself): one order, so policing the policy's own output changes nothing
    markup = markup.replace(' rel="noopener noreferrer" target="_blank"', ' target="_blank" rel="noopener noreferrer"')
    if maths and not keep_all and ("$" in markup or "\\" in markup):
        return _police_maths(markup)
    return markup


def _rewrite_styles(markup: str, keep_all: bool) -> str:
    if "<style" not in markup:
        return markup
    out, pos = [], 0
    for start in _STYLE_START.finditer(markup):
        if start.start() < pos:  # inside a block already rewritten
            continue
        end = markup.find("</style>", start.end())
        end = len(markup) if end < 0 else end
        out += [markup[pos:start.end()], css.clean_stylesheet(markup[start.end():end], keep_all=keep_all)[0]]
        pos = end
    out.append(markup[pos:])
    return "".join(out)


def _police_maths(markup: str) -> str:
    """Text outside :data:`_MATH_SKIP` with its maths policed (decoded, policed, escaped
    again), when MathJax would find maths in the whole. ``markup`` is nh3's output with its
    CSS rewritten, so every ``<`` in it starts a tag."""
    if not typeset(html_lib.unescape("".join(_TAG.split(markup)[::3]))):
        return markup
    out, skip, pos = [], [], 0
    for tag in _TAG.finditer(markup):
        text = markup[pos:tag.start()]
        if not skip and text:
            policed, changed = police_tex(html_lib.unescape(text))
            text = html_lib.escape(policed, quote=False) if changed else text
        out += [text, tag.group(0)]
        pos = tag.end()
        name = tag.group(2).lower()
        if name in _MATH_SKIP:
            if tag.group(1) and skip and skip[-1] == name:
                skip.pop()
            elif not tag.group(1):
                skip.append(name)
    tail = markup[pos:]
    if not skip:
        policed, changed = police_tex(html_lib.unescape(tail))
        tail = html_lib.escape(policed, quote=False) if changed else tail
    out.append(tail)
    return "".join(out)


def _origin(url: str) -> str:
    parts = urlsplit(url.strip())
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}" if parts.scheme and parts.netloc else ""


# -- Markdown -------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _markdown_renderer():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+?\$|\\\\\[.+?\\\\\]|\\\\\(.+?\\\\\)|\\begin\{([a-z]+\*?)\}.+?\\end\{\1\}",
                   re.DOTALL)
_MERMAID_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*mermaid\b", re.MULTILINE | re.IGNORECASE)
_PLACEHOLDER = re.compile(r"@@(\d+)@@")


def render_markdown(source: str) -> str:
    """Markdown (CommonMark, tables, strikethrough) as HTML, unsanitized. Maths (``$...$``,
    ``$$...$$``, ``\\\\(...\\\\)``, ``\\\\[...\\\\]``, environments) is set aside before rendering
    and put back as text after it, so Markdown never reads ``*`` or ``_`` in maths as emphasis
    (JupyterLab's ``removeMath``/``replaceMath`` do the same for its own renderer)."""
    maths: list[str] = []

    def aside(match: re.Match) -> str:
        maths.append(match.group(0))
        return f"@@{len(maths) - 1}@@"

    rendered = _markdown_renderer().render(_MATH.sub(aside, source))
    if not maths:
        return rendered
    return _PLACEHOLDER.sub(lambda m: html_lib.escape(maths[int(m.group(1))], quote=False)
                            if int(m.group(1)) < len(maths) else m.group(0), rendered)


def escape_attribute(value: str) -> str:
    """``value`` quoted for an HTML attribute (``srcdoc``)."""
    return html_lib.escape(value, quote=True)

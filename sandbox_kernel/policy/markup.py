"""HTML, SVG and Markdown under the ``sanitize`` policy: what reaches the page is always ours.

JupyterLab trusts the outputs of every cell the user runs: their scripts and event handlers
run with the page's Jupyter credentials, the images they name are fetched by the user's
browser (a way out for a sandbox with no network), and MathJax typesets the maths in them.
So the output is always *written by this module*, never the input passed along because
"nothing changed" (DOMPurify and ammonia re-serialize always, for the same reason):

- HTML goes through nh3 (the binding to the Rust ``ammonia`` sanitizer, html5ever's parser
  and serializer) with the allowlists of :mod:`.allowlists`. Every URL attribute is checked
  (:meth:`Sanitizer.url_ok`): links may be ``http(s)``, ``mailto``, relative or
  ``#fragment`` (opened in a new tab, ``rel="noopener noreferrer"``), images only
  ``data:image/...``, a relative path (JupyterLab loads it from the notebook's folder: same
  origin) or an allowed origin. ``id`` values must hold a digit or ``-`` (so an output cannot
  name a window global such as ``MathJax``: DOM clobbering). Inline ``<svg>`` is kept under the
  SVG allowlist (matplotlib's figures as HTML).
- CSS in ``<style>`` blocks and ``style`` attributes is rewritten by :mod:`.css` (an
  allowlist, its own serializer: no ``url()``, no ``</style>``), and every block is scoped to
  its own output (:mod:`.stylesheet`).
- **A fixed point.** What the policy writes, policed again, is byte-identical. nh3 removes a
  tag and keeps its children, which can leave nestings HTML cannot express
  (``<li><a><table><li>``); a browser parsing that markup builds another tree (the precondition
  of mutation XSS). So the output is cleaned again, html5ever parsing it as a browser would,
  until it no longer changes (two passes for ordinary markup; at most :data:`PASSES`, else the
  text alone).
- The maths MathJax would typeset in the text (outside ``pre``/``code``, as MathJax skips
  them) loses every macro :mod:`.tex` does not list.
- Markdown is always rendered here (markdown-it-py, CommonMark with tables and strikethrough;
  its maths set aside first, as JupyterLab's ``removeMath`` does) and then cleaned as HTML.

Each function returns ``(clean, changed)``; ``changed`` says whether anything that could act or
fetch was removed: the first pass is compared with the same parser and serializer keeping, on
top of the allowlists, everything active (:mod:`.allowlists`); normalization and inert
attributes (pandas' ``halign``) do not count. It decides the cell's one-line note and, under
``isolate``, whether the original is shown in a frame. It never decides what is emitted.
"""

from __future__ import annotations

import functools
import html as html_lib
import re
from urllib.parse import urlsplit

import nh3
import tinycss2

from . import css
from .allowlists import (
    ACTIVE_TAGS,
    HTML_TAGS,
    INLINE_SVG_ATTRIBUTES,
    NOT_ELEMENTS,
    SVG_ATTRIBUTES,
    SVG_TAGS,
    active_attribute,
    allowed,
)
from .passes import rewrite, svg_document
from .stylesheet import clean_stylesheet

# -- allowlists: .allowlists ---------------------------------------------------------------
PASSES = 4
"""Cleaning passes at most before the policy gives up on a markup's structure and keeps its text."""
_SVG_PAINT = frozenset({"fill", "stroke", "clip-path", "mask", "filter", "marker-start", "marker-mid", "marker-end"})
"""SVG presentation attributes that take ``url(...)``: only ``url(#local)`` is kept."""
_NAMESPACES = {"xmlns": "http://www.w3.org/2000/svg", "xlink": "http://www.w3.org/1999/xlink"}
_URL_ATTRS = {"href", "src", "cite"}
_DATA_IMAGE = re.compile(r"^data:image/(png|jpeg|jpg|gif|webp|bmp|avif)[;,]", re.IGNORECASE)
_RELATIVE = re.compile(r"(?![A-Za-z][A-Za-z0-9+.\-]*:)[^/\\\x00-\x20][^\\\x00-\x1f]*")
"""A path JupyterLab resolves against the notebook's folder (no scheme, no leading ``/``, no
``\\`` anywhere: browsers read it as ``/``)."""
_LINK_SCHEMES = {"http", "https", "mailto"}
_ID = re.compile(r"[A-Za-z][\w.:-]*[-\d][\w.:-]*")
_LOCAL_PAINT = re.compile(r"\s*url\(\s*#[\w.:-]+\s*\)\s*|[^()]*")
_ANY_STYLE = re.compile(r"(?<=>)[^<]*(?=</style>)", re.IGNORECASE)
_SOURCE_TAG = re.compile(r"""<([a-zA-Z][a-zA-Z0-9-]*)((?:[^>"']|"[^"]*"|'[^']*')*)""")
_ATTRIBUTE_NAME = re.compile(r"""[\s/]([^\s"'>/=]+)(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]*))?""")
_REL = re.compile(r' rel="[^"]*"')
_ALL_SCHEMES = {"http", "https", "mailto", "data", "javascript", "vbscript", "file", "ftp", "blob", "ws", "wss"}
_ACTIVE_LOWER = frozenset(t.lower() for t in ACTIVE_TAGS) - {"image"}  # HTML's <image> is parsed as <img>
_KNOWN_TAGS = frozenset(t.lower() for t in HTML_TAGS | SVG_TAGS | ACTIVE_TAGS) | NOT_ELEMENTS


class Sanitizer:
    """HTML, SVG and Markdown cleaning with one set of allowed origins. Nothing in it changes once
    it is built, and it cleans from several threads at once as from one (tests/test_memory.py):
    policies share one per set of origins (:meth:`shared`).

    Args:
        allowed_origins: origins (``"https://cdn.example.org"``) whose images may load;
            empty (the default): only inline ``data:`` images and relative paths.
    """

    @classmethod
    def shared(cls, allowed_origins: tuple[str, ...] | list[str] = ()) -> Sanitizer:
        """The process's sanitizer for ``allowed_origins``, built at its first use (the
        :data:`SHARED` most recently used sets of origins are kept).

        Each holds four nh3 Cleaners: about 420 kB of native memory, which the garbage collector
        does not count, and 3 ms to build (measured here). A policy is made for each ``%%sandbox``
        cell and each API or MCP sandbox; each built its own (issue 37)."""
        return _shared_sanitizer(frozenset(_origin(o) for o in allowed_origins if o))

    def __init__(self, allowed_origins: tuple[str, ...] | list[str] | frozenset[str] = ()) -> None:
        self.allowed_origins = frozenset(_origin(o) for o in allowed_origins if o)
        common = dict(strip_comments=True, link_rel="noopener noreferrer",
                      url_schemes={"http", "https", "mailto", "data"}, clean_content_tags={"script"})
        # The filter is given the origins, never this object: an nh3 Cleaner is invisible to the
        # garbage collector, so a Cleaner holding a bound method of its owner is a cycle that is
        # never freed (about 420 kB a policy: a magic cell's, an API sandbox's).
        attribute = functools.partial(_attribute, self.allowed_origins)
        self._html = nh3.Cleaner(tags=set(HTML_TAGS | SVG_TAGS), attributes=INLINE_SVG_ATTRIBUTES,
                                 attribute_filter=attribute, set_tag_attribute_values={"a": {"target": "_blank"}},
                                 **common)
        self._svg = nh3.Cleaner(tags=set(SVG_TAGS), attributes=SVG_ATTRIBUTES, attribute_filter=attribute, **common)
        # The references for "changed": the same parser and serializer, the active parts kept too.
        reference = dict(tags=set(HTML_TAGS | SVG_TAGS | ACTIVE_TAGS), clean_content_tags=set(),
                         generic_attribute_prefixes={""}, strip_comments=True, link_rel="noopener noreferrer",
                         url_schemes=_ALL_SCHEMES, attribute_filter=_reference_attribute)
        self._reference = nh3.Cleaner(set_tag_attribute_values={"a": {"target": "_blank"}}, **reference)
        self._reference_svg = nh3.Cleaner(**reference)

    # -- URLs ------------------------------------------------------------------------------
    def url_ok(self, tag: str, attr: str, url: str) -> bool:
        """Whether ``url`` may stay in attribute ``attr`` of ``tag`` (:func:`url_ok`)."""
        return url_ok(self.allowed_origins, tag, attr, url)

    def allowed_origin(self, url: str) -> bool:
        """Whether ``url`` is on one of the allowed origins (scheme, host and port)."""
        return _allowed_origin(self.allowed_origins, url)

    # -- HTML, SVG, Markdown ----------------------------------------------------------------
    def html(self, source: str) -> tuple[str, bool]:
        """``(clean_html, changed)`` for an HTML fragment (``text/html``, widget innerHTML)."""
        first = rewrite(self._html.clean(source))
        if _same_but_spacing(source, first):  # the common case (pandas): see :func:`_same_but_spacing`
            return first, False
        return _fixed(first, lambda markup: rewrite(self._html.clean(markup))), self._changed(source, first)

    def svg(self, source: str) -> tuple[str, bool]:
        """``(clean_svg, changed)`` for an SVG document (``image/svg+xml``): well-formed XML
        (:func:`~.passes.svg_document`); the XML declaration and doctype go, the ``<svg>``
        element and its namespaces stay."""
        def clean(markup: str) -> str:
            return svg_document(rewrite(self._svg.clean(markup), maths=False))

        first = clean(source)
        return _fixed(first, clean), self._changed(source, first, maths=False)

    def markdown(self, source: str) -> tuple[str, bool]:
        """``(clean_html, changed)`` for Markdown, rendered by :func:`render_markdown`. A
        ```` ```mermaid ```` fence, which JupyterLab's own renderer would draw, is shown as code:
        that counts as a change (the cell says so)."""
        html, changed = self.html(render_markdown(source))
        return html, changed or _MERMAID_FENCE.search(source) is not None

    def _changed(self, source: str, first: str, maths: bool = True) -> bool:
        """Whether the first pass removed something that could act or fetch (the module docstring)."""
        if _same_but_spacing(source, first):
            return False
        lowered = first.lower()
        for name, attributes in _SOURCE_TAG.findall(source):
            name = name.lower()
            if name in _ACTIVE_LOWER and f"<{name}" not in lowered:
                return True  # an active element gone (ammonia drops SMIL's <animate>/<set> even from the reference)
            if name not in _KNOWN_TAGS and ("-" in name or any(
                    active_attribute(a) for a in _ATTRIBUTE_NAME.findall(attributes))):
                return True  # an unknown element with an active attribute, or a custom element the page may define
        if not maths:  # an SVG document
            reference = svg_document(rewrite(self._reference_svg.clean(source), reference=True))
        else:
            reference = rewrite(self._reference.clean(source), reference=True)
        # ammonia adds its own rel only where rel is not allowed: the reference has none
        return _REL.sub("", reference).strip() != _REL.sub("", first).strip()


SHARED = 16
"""Sets of allowed origins whose :meth:`Sanitizer.shared` sanitizers are kept (most recently used)."""


@functools.lru_cache(maxsize=SHARED)
def _shared_sanitizer(allowed_origins: frozenset[str]) -> Sanitizer:
    return Sanitizer(allowed_origins)


def url_ok(allowed_origins: frozenset[str], tag: str, attr: str, url: str) -> bool:
    """Whether ``url`` may stay in attribute ``attr`` of ``tag``: links are navigation a
    person chooses; everything else the browser would fetch by itself, so it must be inline
    (``data:image/...``, not SVG), a relative path of an ``<img>`` (JupyterLab loads it
    from the notebook's folder) or from one of ``allowed_origins`` (``scheme://host[:port]``,
    lower case). SVG ``<use>`` may only point inside the document."""
    url = url.strip()
    if tag == "use":
        return url.startswith("#")
    if tag == "a" or attr == "cite":  # the scheme as a lenient reader sees it: controls dropped
        scheme = urlsplit(re.sub(r"[\x00-\x20\x7f]", "", url)).scheme.lower()
        return not scheme or scheme in _LINK_SCHEMES
    if _DATA_IMAGE.match(url) or (tag == "img" and _RELATIVE.fullmatch(re.sub(r"[\t\n\r]", "", url))):
        return True
    return _allowed_origin(allowed_origins, url)


def _allowed_origin(allowed_origins: frozenset[str], url: str) -> bool:
    return bool(allowed_origins) and _origin(url) in allowed_origins


def _attribute(allowed_origins: frozenset[str], tag: str, attr: str, value: str) -> str | None:
    """The sanitizer's attribute filter (nh3's ``attribute_filter``): the value kept, rewritten or ``None``."""
    if attr in _URL_ATTRS:
        return value if url_ok(allowed_origins, tag, attr, value) else None
    if attr in _NAMESPACES:
        return value if value == _NAMESPACES[attr] else None
    if attr == "style":
        return css.clean_declarations(value)[0]
    if attr == "id":
        return value if _ID.fullmatch(value) else None
    if attr == "class":
        return " ".join(token for token in value.split() if css.own_class(token)) or None
    if attr in _SVG_PAINT and "(" in value:  # url(#local), or a colour CSS computes (rgb(...))
        return value if _LOCAL_PAINT.fullmatch(value) or css.values_ok(tinycss2.parse_component_value_list(value)) \
            else None
    return value


def _fixed(first: str, clean) -> str:
    """``first`` cleaned again until it no longer changes (:data:`PASSES` at most; then only its
    text, cleaned until it holds)."""
    current = first
    for _ in range(PASSES):
        again = clean(current)
        if again == current:
            return current
        current = again
    text = clean(nh3.clean(current, tags=set()))
    return text if clean(text) == text else ""


def _reference_attribute(tag: str, attr: str, value: str) -> str | None:
    """The reference keeps what the allowlists keep, as it is (style: active declarations too),
    and every other active attribute; it drops the inert ones the allowlists drop."""
    if attr == "style":
        return css.clean_declarations(value, reference=True)[0]
    if attr in _NAMESPACES:
        return value if value == _NAMESPACES[attr] else None
    if attr == "class":
        return " ".join(value.split()) or None
    if allowed(INLINE_SVG_ATTRIBUTES, tag, attr) or active_attribute(attr):
        return value
    return None


def _same_but_spacing(source: str, clean: str) -> bool:
    """Whether the sanitizer only re-spaced ``source`` (and wrote boolean attributes as
    ``name=""``), and its ``<style>`` blocks lost nothing active: then it removed nothing, and
    its output, the same tokens as ``source``, parses to the tree ``source`` parsed to: it is
    already a fixed point. The common case for data tools' HTML (pandas, Styler), checked in a
    few ms a MB; it spares the comparing pass and the confirming one (half the policy's cost for
    a large table)."""
    if len(clean) < len(source) - len(source) // 8:
        return False
    if "<style" in source:
        if any(clean_stylesheet(block)[1] for block in _ANY_STYLE.findall(source)):
            return False
        source, clean = _ANY_STYLE.sub("", source), _ANY_STYLE.sub("", clean)
    return "".join(source.split()).replace(';"', '"') == "".join(clean.split()).replace('=""', "")


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

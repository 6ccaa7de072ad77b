"""Passes over nh3's serialization: what the policy rewrites after the sanitizer.

nh3 (html5ever's serializer) escapes ``<`` and ``>`` in text and in attribute values, so in its
output a ``<`` starts a tag, except inside an HTML ``<style>`` element (raw text, which cannot
hold ``</style``). Inside ``<svg>`` a ``<style>`` is an ordinary element whose text is escaped
(``&gt;``): the passes read and write both forms.

- :func:`rewrite`: each ``<style>`` block's CSS rewritten and scoped (:mod:`.stylesheet`); an
  inline ``<svg>``'s blocks moved to the top of their ``<svg>`` (their scope, see there); inputs
  other than check boxes and radio buttons removed; ammonia's two link attributes in one order;
  the maths MathJax would typeset policed (:mod:`.tex`), outside the elements it skips;
- :func:`svg_document`: an ``image/svg+xml`` value as well-formed XML: its first ``<svg>``
  element only, with the SVG namespace (and XLink's when used), no named entities but XML's.
"""

from __future__ import annotations

import html as html_lib
import re

from .stylesheet import clean_stylesheet
from .tex import police_tex, typeset

TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9:-]*)(?:[^\">]|\"[^\"]*\")*>")
"""A start or end tag in nh3's output (attribute values are double-quoted, ``>`` escaped)."""
_MATH_SKIP = frozenset({"pre", "code", "style", "textarea", "script", "noscript", "annotation", "annotation-xml"})
"""Elements whose text MathJax does not typeset (its ``skipHtmlTags``), unless they carry its
``processHtmlClass`` (``mathjax_process``): so class names holding ``jax`` are removed."""
_INPUT_KEPT = re.compile(r'<input\b[^>]*\stype="(?:checkbox|radio)"')
_LINK_ATTRIBUTES = (' rel="noopener noreferrer" target="_blank"', ' target="_blank" rel="noopener noreferrer"')
SVG_NS, XLINK_NS = "http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"
_XML_ENTITIES = {"&nbsp;": "&#160;"}


def rewrite(markup: str, *, reference: bool = False, maths: bool = True) -> str:
    """nh3's output with the passes of the module docstring (``reference``: styles kept as
    :func:`~.stylesheet.clean_stylesheet` keeps them for the reference, inputs and maths left
    as they are; ``maths``: police the maths, not for SVG documents, which MathJax never sees)."""
    if "<style" in markup or "<input" in markup:
        markup = _elements(markup, reference)
    # rel first when ammonia dropped the href itself: one order, so policing twice changes nothing
    markup = markup.replace(*_LINK_ATTRIBUTES)
    if maths and not reference and ("$" in markup or "\\" in markup):
        return _police_maths(markup)
    return markup


def _elements(markup: str, reference: bool) -> str:
    """The ``<style>`` and ``<input>`` passes of :func:`rewrite`, in one walk over the tags."""
    out, pos, svgs = [], 0, []  # svgs: for each open <svg>, the index in out after its start tag
    for tag in TAG.finditer(markup):
        if tag.start() < pos:
            continue
        out.append(markup[pos:tag.start()])
        pos = tag.end()
        name = tag.group(2).lower()
        if name == "svg":
            if tag.group(1):
                svgs = svgs[:-1]
            else:
                out.append(tag.group(0))
                svgs.append(len(out))
                continue
        if name == "input" and not reference and not _INPUT_KEPT.match(tag.group(0)):
            continue
        if name == "style" and not tag.group(1):
            end = markup.find("</style>", pos)
            end = len(markup) if end < 0 else end
            block = _style(tag.group(0), markup[pos:end], foreign=bool(svgs), reference=reference)
            pos = min(len(markup), end + len("</style>"))
            if svgs:
                out.insert(svgs[-1], block)  # at the top of its <svg>: the scope is the drawing
                svgs = [i + 1 if i >= svgs[-1] else i for i in svgs]
            else:
                out.append(block)
            continue
        out.append(tag.group(0))
    out.append(markup[pos:])
    return "".join(out)


def _style(start: str, text: str, *, foreign: bool, reference: bool) -> str:
    """One ``<style>`` element, its CSS cleaned and scoped; ``foreign``: inside ``<svg>``, where
    its text is escaped markup, not raw text."""
    css = html_lib.unescape(text) if foreign else text
    clean = clean_stylesheet(css, reference=reference)[0]
    return f"{start}{html_lib.escape(clean, quote=False) if foreign else clean}</style>"


def _police_maths(markup: str) -> str:
    """Text outside :data:`_MATH_SKIP` with its maths policed (decoded, policed, escaped
    again), when MathJax would find maths in the whole."""
    if not typeset(html_lib.unescape("".join(TAG.split(markup)[::3]))):
        return markup
    out, skip, pos = [], [], 0
    for tag in TAG.finditer(markup):
        text = markup[pos:tag.start()]
        if not skip and text:
            text = _policed_text(text)
        out += [text, tag.group(0)]
        pos = tag.end()
        name = tag.group(2).lower()
        if name in _MATH_SKIP:
            if tag.group(1) and skip and skip[-1] == name:
                skip.pop()
            elif not tag.group(1):
                skip.append(name)
    out.append(markup[pos:] if skip else _policed_text(markup[pos:]))
    return "".join(out)


def _policed_text(text: str) -> str:
    policed, changed = police_tex(html_lib.unescape(text))
    return html_lib.escape(policed, quote=False) if changed else text


def svg_document(markup: str) -> str:
    """An ``image/svg+xml`` value (nh3's HTML serialization of it) as well-formed XML: the first
    ``<svg>`` element and what it holds (text or markup around it goes), ``xmlns`` on it (and
    ``xmlns:xlink`` when an ``xlink:`` attribute is used), ``&nbsp;`` as ``&#160;``. An SVG
    without an ``<svg>`` element is empty."""
    depth, start = 0, None
    for tag in TAG.finditer(markup):
        if tag.group(2).lower() != "svg":
            continue
        if not tag.group(1):
            start = tag.start() if start is None else start
            depth += 1
        elif start is not None:
            depth -= 1
            if depth == 0:
                markup = markup[start:tag.end()]
                break
    else:
        return ""
    for name, value in _XML_ENTITIES.items():
        markup = markup.replace(name, value)
    first = TAG.match(markup).group(0)
    root = first
    if ' xmlns="' not in root:
        root = root[:-1] + f' xmlns="{SVG_NS}">'
    if "xlink:" in markup and ' xmlns:xlink="' not in root:
        root = root[:-1] + f' xmlns:xlink="{XLINK_NS}">'
    return root + markup[len(first):]


__all__ = ["rewrite", "svg_document", "TAG", "SVG_NS", "XLINK_NS"]

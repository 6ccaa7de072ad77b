"""The judge of ``tests/test_policy_fuzz.py``: what in a policed MIME bundle could act in the page.

It knows nothing of the policy's code. It reads outputs the way the page's renderers do:
HTML through html5lib (a real HTML5 parser, with the tree-building quirks browsers have: foreign
content, foster parenting, raw-text elements), CSS through tinycss2, Markdown through
markdown-it (then as HTML), LaTeX, Mermaid and chart specs by the features their renderers act
on (MathJax's ``\\style``, mermaid's image shapes and directives, vega-embed's URL keys and
embed options). :func:`violations` lists what it found, as short strings (``"img onerror"``);
an empty list means nothing in the bundle can run script, fetch from another origin by itself
or navigate the page.
"""

from __future__ import annotations

import json
import re
from typing import Any
from xml.etree import ElementTree

import html5lib
import tinycss2

SVG_NS, XLINK_NS = "http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"

FETCHING = {"src", "srcset", "background", "poster", "data", "lowsrc", "dynsrc", "action", "formaction",
            "codebase", "manifest", "archive", "classid", "imagesrcset", "xlink:href", "href"}
"""Attributes holding a URL (every one but a link's ``href`` is fetched or submitted without a click)."""
LINKS = {"a", "area"}
ACTIVE_ELEMENTS = {"script", "iframe", "frame", "frameset", "object", "embed", "applet", "base", "meta", "link",
                   "form", "portal", "noscript", "template"}
"""HTML elements that run, load, navigate or re-parse (mXSS) by what they are, whatever their attributes."""
ACTIVE_SVG = {"script", "foreignobject", "animate", "set", "animatemotion", "animatetransform", "handler", "listener",
              "feimage", "iframe"}
"""The same in SVG (SMIL can set any attribute, including a URL, after any policy has looked)."""
CSS_LOADERS = {"url", "image", "image-set", "-webkit-image-set", "cross-fade", "-webkit-cross-fade", "element",
               "-moz-element", "src", "paint", "expression"}
CSS_AT_RULES_OK = {"media", "supports", "container", "layer", "keyframes", "-webkit-keyframes", "scope"}
LATEX_HOSTILE = re.compile(
    r"(?<!\\)(?:\\\\)*\\\s*(style|class|cssId|href|unicode|require|url|data|html|mmlToken|def|gdef|edef|xdef|let|"
    r"newcommand|renewcommand|newenvironment|renewenvironment)(?![A-Za-z])"
    r"|(?<!\\)(?:\\\\)*\\\s*(bbox)\s*\[[^\]]*(?:url|\(|;|cursor|image)")
"""What must never reach MathJax from the sandbox: CSS (``\\style``, ``\\bbox`` styles beyond a border), page
classes and ids, URLs, ``\\unicode`` fonts, extension loading, raw MathML and new macros."""
MERMAID_ACTIVE = (re.compile(r"@\{[^}]*\b(img|icon)\s*:", re.I), re.compile(r"%%\s*\{"),
                  re.compile(r"\A\s*---"), re.compile(r"themeCSS|fontFamily|url\s*\(|\\", re.I),
                  re.compile(r"<"), re.compile(r"^\s*(click|callback|href|links?)\b", re.I | re.M),
                  re.compile(r"\b_(top|self|parent)\b|[a-z][a-z0-9+.\-]*:[\t\n]*/", re.I))
CHART_URL_KEYS = {"url", "href", "loader", "baseURL", "editorUrl", "sourceHeader", "sourceFooter",
                  "defaultStyle"}
"""Keys flagged whatever their value; ``source`` only in Plotly's ``layout.images`` (elsewhere
it names a Vega dataset). vega-embed's own ``config``/``patch`` URLs live in ``usermeta`` and the
output metadata, both judged whole."""
MARKDOWN_LIKE = {"text/markdown"}
HTML_LIKE = {"text/html"}


def _scheme(url: str) -> str:
    """The scheme a browser sees: control characters and whitespace inside are dropped."""
    cleaned = re.sub(r"[\x00-\x20\x7f]", "", url).lower()
    match = re.match(r"([a-z][a-z0-9+.\-]*):", cleaned)
    return match.group(1) if match else ""


def external(url: str) -> bool:
    """Whether the browser would send ``url`` to another origin (or run it)."""
    stripped = re.sub(r"[\x00-\x20\x7f]", "", url)
    if re.match(r"[/\\]{2}", stripped):
        return True
    scheme = _scheme(url)
    if not scheme:
        return False
    if scheme == "data":
        return not re.match(r"data:image/(png|jpe?g|gif|webp|bmp|avif)[;,]", stripped, re.I)
    return scheme not in ("mailto",)


def css_violations(css: str, *, block: bool) -> list[str]:
    """What in a ``<style>`` block (``block``) or a ``style`` attribute loads or runs, and, in a
    block, any rule that could style an element outside its output (:func:`_unscoped`)."""
    found = []
    nodes = tinycss2.parse_stylesheet(css) if block else tinycss2.parse_blocks_contents(css)
    if block:
        found += _unscoped(nodes)
        nodes = [inner for node in nodes for inner in (
            tinycss2.parse_stylesheet(node.content) if node.type == "at-rule" and node.lower_at_keyword == "scope"
            and node.content is not None else [node])]
    for node in nodes:
        if node.type == "at-rule" and node.lower_at_keyword not in CSS_AT_RULES_OK:
            found.append(f"css @{node.lower_at_keyword}")
        for part in ("prelude", "content", "value"):
            inner = getattr(node, part, None)
            if isinstance(inner, list):
                found += _css_tokens(inner)
    if block and "<" in css:
        found.append("css < in a style block")
    return found


def _unscoped(nodes, top: bool = True) -> list[str]:
    """Rules of a ``<style>`` block that could reach past their output: at the top, anything but
    ``@keyframes`` and one ``@scope`` without a prelude (CSS Cascading 6: its root is the block's
    parent); inside it, a style rule with a selector that does not start with ``:scope`` and a
    descendant or child combinator (which could match the root: JupyterLab's own node)."""
    found = []
    for node in nodes:
        if node.type in ("whitespace", "comment", "error"):
            continue
        keyword = node.lower_at_keyword if node.type == "at-rule" else None
        if top:
            if keyword == "scope" and node.content is not None and not tinycss2.serialize(node.prelude).strip():
                found += _unscoped(tinycss2.parse_stylesheet(node.content), top=False)
            elif keyword not in ("keyframes", "-webkit-keyframes"):
                found.append(f"css outside @scope: {tinycss2.serialize([node])[:60]}")
        elif node.type == "qualified-rule":
            for selector in tinycss2.serialize(node.prelude).split(","):
                if not re.match(r":scope(\s*>\s*|\s+)[^\s>+~]", selector.strip()):
                    found.append(f"css selector not below :scope: {selector.strip()[:60]}")
            found += _nested(node.content)
        elif keyword in ("media", "supports", "container", "layer") and node.content is not None:
            found += _unscoped(tinycss2.parse_stylesheet(node.content), top=False)
        elif keyword == "scope":
            found.append("css nested @scope")
    return found


def _nested(content) -> list[str]:
    """Nested style rules (CSS Nesting) that could select their parent's ancestors: ``&`` but
    as a selector's first token, or ``:scope``, anywhere in a nested rule's selector."""
    found = []
    for node in tinycss2.parse_blocks_contents(content or []):
        if node.type == "qualified-rule":
            for selector in tinycss2.serialize(node.prelude).split(","):
                selector = selector.strip()
                if "&" in selector.removeprefix("&") or re.search(r":scope(?![\w-])", selector, re.I):
                    found.append(f"css nested selector above its parent: {selector[:60]}")
            found += _nested(node.content)
        elif node.type == "at-rule" and node.content is not None:
            found += _nested(node.content)
    return found


def _css_tokens(tokens) -> list[str]:
    found = []
    for token in tokens or ():
        if isinstance(token, str):
            continue
        if token.type == "url":
            found.append("css url")
        elif token.type == "function" and token.lower_name in CSS_LOADERS:
            found.append(f"css {token.lower_name}()")
        elif token.type == "ident" and token.lower_value in ("expression", "behavior", "-moz-binding"):
            found.append(f"css {token.lower_value}")
        elif token.type == "at-keyword" and token.lower_value == "import":
            found.append("css @import")
        for part in ("arguments", "content", "prelude"):
            inner = getattr(token, part, None)
            if isinstance(inner, list):
                found += _css_tokens(inner)
        if token.type == "declaration":
            found += _css_tokens(token.value)
    return found


def _local(tag: Any) -> tuple[str, str]:
    if not isinstance(tag, str):
        return "", ""  # a comment
    if tag.startswith("{"):
        ns, name = tag[1:].split("}", 1)
        return ns, name.lower()
    return "", tag.lower()


def _attribute_name(name: str) -> str:
    if name.startswith("{"):
        ns, local = name[1:].split("}", 1)
        return f"xlink:{local}" if ns == XLINK_NS else local.lower()
    return name.lower()


def html_violations(html: str, *, isolate: bool = False, svg: bool = False) -> list[str]:
    """What in an HTML fragment could run script, fetch from another origin, navigate the page
    or mutate when the browser parses it again. ``isolate``: frames sandboxed without
    ``allow-same-origin`` are allowed (their content is the frame's business). ``svg``: an SVG
    document (shown as an image: no MathJax)."""
    tree = html5lib.parseFragment(html, treebuilder="etree", namespaceHTMLElements=False)
    found: list[str] = []
    for element in tree.iter():
        ns, name = _local(element.tag)
        if not name:
            continue
        attributes = {_attribute_name(k): v for k, v in element.attrib.items()}
        if name == "iframe" and isolate:
            sandbox = set(attributes.get("sandbox", "allow-same-origin").split())
            if sandbox & {"allow-same-origin", "allow-top-navigation", "allow-popups-to-escape-sandbox",
                          "allow-top-navigation-by-user-activation", "allow-popups"} or "src" in attributes:
                found.append(f"iframe sandbox={attributes.get('sandbox')!r}")
            continue
        if name in (ACTIVE_SVG if ns == SVG_NS else ACTIVE_ELEMENTS if ns == "" else {"script"}):
            found.append(name)
        for attr, value in attributes.items():
            if attr.startswith("on"):
                found.append(f"{name} {attr}")
            elif attr == "style":
                found += [f"{name} style: {v}" for v in css_violations(value, block=False)]
            elif attr in ("srcset", "imagesrcset"):
                if any(external(part.strip().split(" ")[0]) for part in value.split(",") if part.strip()):
                    found.append(f"{name} {attr} external")
            elif attr in FETCHING or (attr == "href" and ns == SVG_NS):
                if name in LINKS:
                    if _scheme(value) in ("javascript", "vbscript", "data"):
                        found.append(f"{name} href {_scheme(value)}:")
                elif external(value) or _scheme(value) in ("javascript", "vbscript"):
                    found.append(f"{name} {attr} {_scheme(value) or 'external'}")
            elif attr in ("target", "formtarget") and value.strip().lower() not in ("_blank", ""):
                found.append(f"{name} target={value}")
            elif attr == "http-equiv":
                found.append(f"{name} http-equiv")
        if name == "style":
            found += [f"style block: {v}" for v in css_violations(_text(element), block=True)]
    found += _reparse_mutations(tree)
    if not svg:
        found += [f"maths in text: {v}" for v in latex_violations(" ".join(MATHS.findall(typeset_text(tree))))]
    return found


MATHS = re.compile(r"\$\$.*?\$\$|\$.*?\$|\\\(.*?\\\)|\\\[.*?\\\]|\\begin\{[^}]*\}.*?\\end\{[^}]*\}", re.S)
"""What MathJax typesets in an HTML page's text (JupyterLab's delimiters: ``$``, ``$$``, ``\\(``,
``\\[``, and environments), across inline elements as MathJax joins their text."""


MATHJAX_SKIP = {"script", "noscript", "style", "textarea", "pre", "code", "annotation", "annotation-xml"}
MATHJAX_PROCESS = re.compile(r"(^| )mathjax_process( |$)")
MATHJAX_IGNORE = re.compile(r"(^| )(tex2jax_ignore|mathjax_ignore)( |$)")


def typeset_text(tree) -> str:
    """The text MathJax 3 reads, as JupyterLab configures it: not inside ``skipHtmlTags`` or an
    ``ignoreHtmlClass`` element, unless an element's class matches ``processHtmlClass``
    (``mathjax_process`` brings a ``<code>`` back)."""
    parts: list[str] = []

    def walk(element, ignore: bool) -> None:
        _, name = _local(element.tag)
        cls = element.attrib.get("class", "") if name else ""
        process = bool(MATHJAX_PROCESS.search(cls))
        if name and name in MATHJAX_SKIP and not process:
            ignore = True
        elif name:
            ignore = (ignore or bool(MATHJAX_IGNORE.search(cls))) and not process
        if not ignore and name and element.text:
            parts.append(element.text)
        for child in element:
            walk(child, ignore)
            if not ignore and child.tail:
                parts.append(child.tail)

    walk(tree, False)
    return " ".join(parts)


def _text(element: ElementTree.Element) -> str:
    return "".join(element.itertext())


def _shape(tree) -> list[tuple]:
    # namespace declarations are left out: html5lib's serializer writes xmlns:xlink as "xlink"
    return [(e.tag, sorted((_attribute_name(k), v) for k, v in e.attrib.items()
                           if "2000/xmlns" not in k and k not in ("xlink", "xmlns")),
             (e.text or "").strip(), (e.tail or "").strip())
            for e in tree.iter() if isinstance(e.tag, str)]


def _reparse_mutations(tree) -> list[str]:
    """mXSS: the tree, serialized and parsed again (as a page does with innerHTML), must be the
    same tree. A change means a later sanitizer-free parse sees other elements. (html5lib's
    serializer writes an attribute in the XLink namespace without its ``xlink:`` prefix, which
    the HTML serialization algorithm keeps: a copy of the tree spells the prefix out first.)"""
    import copy

    from html5lib import serializer, treewalkers

    spelled = copy.deepcopy(tree)
    for element in spelled.iter():
        for key in [k for k in element.attrib if isinstance(k, str) and k.startswith(f"{{{XLINK_NS}}}")]:
            element.attrib[f"xlink:{key.split('}', 1)[1]}"] = element.attrib.pop(key)
    walker = treewalkers.getTreeWalker("etree")
    again = serializer.HTMLSerializer(omit_optional_tags=False, quote_attr_values="always").render(walker(spelled))
    second = html5lib.parseFragment(again, treebuilder="etree", namespaceHTMLElements=False)
    return [] if _shape(tree) == _shape(second) else ["mutates when parsed again"]


def markdown_violations(source: str) -> list[str]:
    """Markdown as JupyterLab renders it: its HTML (markdown-it, HTML on) judged as HTML, its
    maths judged as LaTeX and its ``mermaid`` fences as Mermaid."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    found = html_violations(md.render(source))
    for token in md.parse(source):
        if token.type == "fence" and token.info.strip().lower().startswith("mermaid"):
            found += [f"markdown fence: {v}" for v in mermaid_violations(token.content)]
    found += [f"markdown maths: {m}" for m in latex_violations(source)]
    return found


def latex_violations(source: str) -> list[str]:
    return [f"\\{m.group(1) or m.group(2)}" for m in LATEX_HOSTILE.finditer(source)]


def mermaid_violations(source: str) -> list[str]:
    return [f"mermaid {pattern.pattern}" for pattern in MERMAID_ACTIVE if pattern.search(source)]


def chart_violations(spec: Any, path: str = "") -> list[str]:
    """URL-bearing keys of Vega, Vega-Lite and Plotly specs, whatever the value's type, and
    vega-embed's options carried in ``usermeta``."""
    found = []
    if isinstance(spec, dict):
        for key, value in spec.items():
            if key in CHART_URL_KEYS and not (isinstance(value, str) and value.startswith("data:image/")):
                found.append(f"chart {path}/{key}")
            elif key == "source" and "/images/" in f"{path}/" and not (isinstance(value, str)
                                                                      and value.startswith("data:image/")):
                found.append(f"chart {path}/source")
            elif key == "usermeta" and isinstance(value, dict) and "embedOptions" in value:
                found.append(f"chart {path}/usermeta/embedOptions")
            else:
                found += chart_violations(value, f"{path}/{key}")
    elif isinstance(spec, list):
        for i, value in enumerate(spec):
            found += chart_violations(value, f"{path}/{i}")
    elif isinstance(spec, str) and path.rsplit("/", 1)[-1] in ("cursor", "background") \
            and re.search(r"url\s*\(|image-set\s*\(", spec, re.I):
        found.append(f"chart {path} CSS url()")
    return found


KNOWN = {"text/plain", "text/html", "text/markdown", "text/latex", "image/svg+xml", "image/png", "image/jpeg",
         "image/gif", "image/webp", "image/bmp", "application/json", "application/pdf", "text/vnd.mermaid",
         "application/vnd.jupyter.widget-view+json", "application/vnd.jupyter.stdout",
         "application/vnd.jupyter.stderr"}
CHARTS = re.compile(r"^application/vnd\.(vega|vegalite|plotly)\.", re.I)


def violations(data: dict[str, Any], metadata: dict[str, Any] | None = None, *, isolate: bool = False) -> list[str]:
    """Everything in a bundle that could act in the page (see the module docstring)."""
    found = []
    for mime, value in data.items():
        text = "".join(value) if isinstance(value, list) else value
        if mime in HTML_LIKE:
            found += [f"{mime}: {v}" for v in html_violations(text, isolate=isolate)]
        elif mime in MARKDOWN_LIKE:
            found += [f"{mime}: {v}" for v in markdown_violations(text)]
        elif mime == "text/latex":
            found += [f"{mime}: {v}" for v in latex_violations(text)]
        elif mime == "text/vnd.mermaid":
            found += [f"{mime}: {v}" for v in mermaid_violations(text)]
        elif mime == "image/svg+xml":
            found += [f"{mime}: {v}" for v in html_violations(text, svg=True)]
        elif CHARTS.match(mime):
            found += [f"{mime}: {v}" for v in chart_violations(value)]
        elif mime not in KNOWN:
            found.append(f"unknown MIME type {mime}")
        elif re.search(r"javascript", mime, re.I):
            found.append(mime)
    for mime, meta in (metadata or {}).items():
        if CHARTS.match(mime) and isinstance(meta, dict):
            options = meta.get("embed_options")
            if options != {"actions": False, "tooltip": False}:  # no actions menu; Vega's text tooltips
                found.append(f"metadata {mime} embed_options {json.dumps(options)[:80]}")
        if re.search(r"(https?:)?//|javascript:", json.dumps(meta), re.I):
            found.append(f"metadata {mime} URL")
    return found

"""CSS under the output policy: an allowlist of what CSS may say, and a serializer of our own.

CSS reaches the page in ``<style>`` blocks and ``style`` attributes (``text/html``, Markdown,
the ``HTML`` and ``Output`` widgets) and in widget style traits. It can fetch (``url()``,
``image-set()``, ``@import``, ``@font-face``: a way out for a sandbox with no network) and, in
a ``<style>`` block, end the block: a string holding ``\\3c/style\\3e`` parses to ``</style>``,
and a serializer that writes it back unescaped lets the markup after it run.

So nothing here is passed through. The CSS is parsed with tinycss2 (CSS Syntax Level 3, the
tokenizer browsers implement) and written back by :func:`serialize`, which escapes ``<``,
``>``, ``&`` and every other character outside a small safe set in each string, identifier,
hash and dimension unit, as a hex escape (``\\3c ``). What is kept is a closed world:

- component values: identifiers, numbers, percentages, dimensions, hashes, strings, the
  punctuation of CSS, and functions named in :data:`FUNCTIONS` (colours, maths, gradients,
  transforms, filters, shapes, selectors' ``:is()``/``:nth-child()`` ...); a ``url`` token, a
  parse error or any other function drops the declaration (or the rule, in a selector);
- at-rules: ``@media``, ``@supports``, ``@container``, ``@layer`` and ``@keyframes``, their
  contents cleaned alike; every other at-rule goes (``@import``, ``@font-face``,
  ``@namespace``, ``@property``, ``@charset``, ...);
- property names: any, except those that bind behaviour (``behavior``, ``-moz-binding``).

``<style>`` blocks are cleaned with these rules and scoped to their output by
:mod:`.stylesheet`. What is dropped counts for the cell's note only when it is
:func:`active` (could load or bind behaviour).
"""

from __future__ import annotations

import re

import tinycss2

FUNCTIONS = frozenset({
    # colours (CSS Color 4/5)
    "rgb", "rgba", "hsl", "hsla", "hwb", "lab", "lch", "oklab", "oklch", "color", "color-mix", "light-dark",
    "device-cmyk",
    # maths and references to custom properties (their values are policed where they are declared)
    "calc", "min", "max", "clamp", "round", "mod", "rem", "abs", "sign", "sin", "cos", "tan", "asin", "acos",
    "atan", "atan2", "pow", "sqrt", "hypot", "log", "exp", "var", "env",
    # gradients (images drawn by the browser, no fetch)
    "linear-gradient", "radial-gradient", "conic-gradient", "repeating-linear-gradient",
    "repeating-radial-gradient", "repeating-conic-gradient", "-webkit-linear-gradient", "-webkit-radial-gradient",
    # transforms, easing, filters, shapes, grids, counters
    "translate", "translatex", "translatey", "translatez", "translate3d", "rotate", "rotatex", "rotatey", "rotatez",
    "rotate3d", "scale", "scalex", "scaley", "scalez", "scale3d", "skew", "skewx", "skewy", "matrix", "matrix3d",
    "perspective", "cubic-bezier", "steps", "linear", "blur", "brightness", "contrast", "drop-shadow", "grayscale",
    "hue-rotate", "invert", "opacity", "saturate", "sepia", "inset", "circle", "ellipse", "polygon", "rect", "xywh",
    "repeat", "minmax", "fit-content", "counter", "counters", "symbols",
    # functional pseudo-classes in selectors
    "not", "is", "where", "has", "nth-child", "nth-last-child", "nth-of-type", "nth-last-of-type", "lang", "dir",
})
"""Function names (lower case) that compute a value and load nothing."""

AT_RULES = frozenset({"media", "supports", "container", "layer", "keyframes", "-webkit-keyframes"})
"""At-rules kept (their preludes checked like values, their contents cleaned like a stylesheet)."""

BEHAVIOUR_PROPERTIES = frozenset({"behavior", "-moz-binding", "-ms-behavior"})

_TOKENS = frozenset({"whitespace", "ident", "number", "percentage", "dimension", "hash", "string", "literal",
                     "() block", "[] block", "{} block", "function", "comment"})
_SAFE_CHAR = re.compile(r"[A-Za-z0-9_\-\u0080-\U0010ffff]")
_STRING_SAFE = re.compile(r"[A-Za-z0-9 _\-.,:;!?#%/()*+=@|~^$'\[\]{}\u0080-\U0010ffff]")


# -- checking ------------------------------------------------------------------------------------
def values_ok(tokens) -> bool:
    """Whether CSS component values are all of the kinds kept (see the module docstring)."""
    for token in tokens or ():
        if token.type not in _TOKENS:
            return False
        if token.type == "function" and token.lower_name not in FUNCTIONS:
            return False
        if token.type == "literal" and token.value not in (":", ";", ",", "*", "/", "+", "-", ">", "~", "|",
                                                          "=", ".", "!", "%", "&", "^", "$"):
            return False
        inner = getattr(token, "arguments", None)
        if inner is None and token.type.endswith("block"):
            inner = token.content
        if inner is not None and not values_ok(inner):
            return False
    return True


PAGE_CLASSES = re.compile(r"(jp-|lm-|p-|cm-|vg-|mjx|toastify)|.*jax", re.I)
"""Class names of the page's own stylesheets: JupyterLab's ``jp-``, Lumino's ``lm-`` (``p-``
before), CodeMirror's ``cm-``, vega-embed's ``vg-``, MathJax's (``mjx``, and ``processHtmlClass``:
any name holding "jax" makes MathJax typeset the element), Toastify's. An output that wears one
gets that rule's declarations, which the policy never saw: ``lm-cursor-backdrop`` is ``position:
fixed; z-index: 100`` (Lumino), as are ``jp-Notebook-ExecutionIndicator-tooltip`` and
``Toastify__toast-container``. ipywidgets' own (``widget-``, ``jupyter-``) stay: the widgets set
them themselves (``interact`` is ``widget-interact``), and their rules only lay widgets out."""


def own_class(name: str) -> bool:
    """Whether an output may wear class ``name``: not one of the page's (:data:`PAGE_CLASSES`)."""
    return not PAGE_CLASSES.match(name)


POSITIONS = frozenset({"static", "relative"})
"""The ``position`` values kept: those that leave an element in its output area's flow, which
JupyterLab's output area (``overflow: auto``) clips. ``fixed`` and ``absolute`` (whose
containing block may lie outside the output area) and ``sticky`` let an invisible link cover
other parts of the page, so any click there would open another origin."""


def declaration_ok(node) -> bool:
    """A declaration whose property binds no behaviour, that does not take an element out of
    its output area (``position`` other than :data:`POSITIONS`), and whose value :func:`values_ok`."""
    if node.type != "declaration" or node.lower_name in BEHAVIOUR_PROPERTIES:
        return False
    if node.lower_name == "position":
        values = [t for t in node.value if t.type not in ("whitespace", "comment")]
        if len(values) != 1 or values[0].type != "ident" or values[0].lower_value not in POSITIONS:
            return False
    return values_ok(node.value)


LOADERS = frozenset({"url", "image", "image-set", "-webkit-image-set", "cross-fade", "-webkit-cross-fade", "element",
                     "-moz-element", "src", "paint", "expression"})
"""Functions that make the browser fetch (or, in old engines, run script)."""


def active(node) -> bool:
    """Whether a declaration (or a rule) could act or fetch: a ``url`` token or a function of
    :data:`LOADERS` anywhere in it (but an inline ``data:image/`` URL), a bad URL or string, a
    property that binds behaviour, ``@import`` or ``@font-face``. What the policy drops for any other reason (an
    unknown function such as ``anchor()``, a ``position`` out of the output's flow) is dropped
    without the cell's note."""
    if node.type == "declaration":
        return node.lower_name in BEHAVIOUR_PROPERTIES or _loads(node.value)
    if node.type == "at-rule" and node.lower_at_keyword in ("import", "font-face"):
        return True
    return any(_loads(getattr(node, part, None)) for part in ("prelude", "content"))


def _loads(tokens) -> bool:
    for token in tokens or ():
        if (token.type == "url" or (token.type == "function" and token.lower_name in LOADERS)) \
                and not _inline_image(token):
            return True
        if token.type == "error":  # a bad url(...) or string: what old engines' script URLs looked like
            return True
        if token.type == "ident" and token.lower_value in ("expression", "behavior", "-moz-binding"):
            return True
        inner = getattr(token, "arguments", None) or getattr(token, "content", None)
        if isinstance(inner, list) and _loads(inner):
            return True
    return False


def _inline_image(token) -> bool:
    """``url(data:image/...)``, in either form: drawn from the output itself, nothing fetched."""
    if token.type == "function" and token.lower_name == "url":
        args = [t for t in token.arguments if t.type not in ("whitespace", "comment")]
        token = args[0] if len(args) == 1 and args[0].type == "string" else None
    return token is not None and token.type in ("url", "string") and \
        token.value.strip().lower().startswith("data:image/")


# -- cleaning ------------------------------------------------------------------------------------
def kept(node, reference: bool) -> bool:
    """Whether a declaration stays: it passes :func:`declaration_ok`, or (``reference``: the
    reference the policy compares its own writing with, never emitted) it is :func:`active`."""
    return declaration_ok(node) or (reference and node.type == "declaration" and active(node))


def clean_declarations(css: str, *, reference: bool = False) -> tuple[str, bool]:
    """``(canonical, removed)`` for a ``style`` attribute's declarations: those that pass
    :func:`declaration_ok`, re-serialized by :func:`serialize`; ``removed``: an :func:`active`
    one was dropped. ``reference``: active ones are kept too (see :func:`kept`)."""
    nodes = [n for n in tinycss2.parse_blocks_contents(css) if n.type not in ("whitespace", "comment")]
    out = [n for n in nodes if kept(n, reference)]
    removed = any(active(n) for n in nodes if n not in out)
    return "; ".join(declaration(n, reference) for n in out if n.type == "declaration"), removed


def clean_value(prop: str, value: str) -> str | None:
    """One property's value, canonical, or None when it does not pass (widget style traits)."""
    nodes = tinycss2.parse_blocks_contents(f"{prop}: {value}")
    nodes = [n for n in nodes if n.type not in ("whitespace", "comment")]
    if len(nodes) != 1 or not declaration_ok(nodes[0]):
        return None
    return serialize(nodes[0].value).strip()


def declaration(node, reference: bool = False) -> str:
    """One declaration as the policy writes it (``reference``: anything kept, unchecked)."""
    important = " !important" if node.important else ""
    name = node.name if node.name.startswith("--") else node.lower_name
    return f"{_name(name)}: {serialize(node.value, not reference).strip()}{important}"


# -- serializing ---------------------------------------------------------------------------------
def serialize(tokens, strict: bool = True) -> str:
    """Component values as CSS text in which ``<``, ``>`` (but the combinator/delimiter), ``&``,
    quotes and backslashes inside strings, identifiers, hashes and units are hex escapes.
    Comments are left out. Raises ValueError for a token kind :func:`values_ok` refuses, unless
    not ``strict`` (the reference for ``changed``, which never reaches the page)."""
    return "".join(_token(t, strict) for t in tokens or ())


def _token(token, strict: bool) -> str:
    kind = token.type
    if kind == "whitespace":
        return " "
    if kind == "comment":
        return ""
    if kind == "ident":
        return _name(token.value)
    if kind == "string":
        return '"' + "".join(c if _STRING_SAFE.fullmatch(c) and c not in "'" else _hex(c) for c in token.value) + '"'
    if kind == "hash":
        return "#" + "".join(c if _SAFE_CHAR.fullmatch(c) else _hex(c) for c in token.value)
    if kind in ("number", "percentage"):
        return token.representation + ("%" if kind == "percentage" else "")
    if kind == "dimension":
        return token.representation + _name(token.unit, unit=True)
    if kind == "literal":
        return token.value if token.value != "<" else "< "  # (strict never gets here) "< /style"
    if kind == "function":
        return f"{_name(token.name)}({serialize(token.arguments, strict)})"
    if kind == "() block":
        return f"({serialize(token.content, strict)})"
    if kind == "[] block":
        return f"[{serialize(token.content, strict)}]"
    if kind == "{} block":
        return f"{{{serialize(token.content, strict)}}}"
    if not strict:
        return "" if kind == "error" else tinycss2.serialize([token])
    raise ValueError(f"a CSS {kind} token is never written back")


def _name(value: str, unit: bool = False) -> str:
    """An identifier (or unit) that parses back to ``value``, with hex escapes for anything
    but letters, digits, ``_``, ``-`` and non-ASCII, and for a leading digit or ``--digit``."""
    out = []
    for i, c in enumerate(value):
        lead_digit = (not unit and c.isdigit() and (i == 0 or (i == 1 and value[0] == "-")))
        out.append(_hex(c) if lead_digit or not _SAFE_CHAR.fullmatch(c) else c)
    if not unit and value == "-":
        return "\\2d "
    return "".join(out)


def _hex(c: str) -> str:
    return f"\\{ord(c):x} "


__all__ = ["clean_declarations", "clean_value", "declaration", "serialize", "values_ok", "declaration_ok", "active",
           "kept", "FUNCTIONS", "AT_RULES", "LOADERS"]

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


# -- cleaning ------------------------------------------------------------------------------------
def clean_declarations(css: str, *, keep_all: bool = False) -> tuple[str, bool]:
    """``(canonical, changed)`` for a ``style`` attribute's declarations: those that pass
    :func:`declaration_ok`, re-serialized by :func:`serialize` (``keep_all``: none dropped,
    the reference for ``changed``)."""
    nodes = [n for n in tinycss2.parse_blocks_contents(css) if n.type not in ("whitespace", "comment")]
    kept = [n for n in nodes if keep_all or declaration_ok(n)]
    return "; ".join(_declaration(n, keep_all) for n in kept if n.type == "declaration"), len(kept) != len(nodes)


def clean_value(prop: str, value: str) -> str | None:
    """One property's value, canonical, or None when it does not pass (widget style traits)."""
    nodes = tinycss2.parse_blocks_contents(f"{prop}: {value}")
    nodes = [n for n in nodes if n.type not in ("whitespace", "comment")]
    if len(nodes) != 1 or not declaration_ok(nodes[0]):
        return None
    return serialize(nodes[0].value).strip()


def clean_stylesheet(css: str, *, keep_all: bool = False) -> tuple[str, bool]:
    """``(canonical, changed)`` for a ``<style>`` block: qualified rules keep their declarations
    that pass; kept at-rules are cleaned alike; everything else goes. The result never holds
    ``<``, so it cannot end its ``<style>`` element."""
    kept, changed = _rules(tinycss2.parse_stylesheet(css, skip_comments=True, skip_whitespace=True), keep_all)
    return "\n".join(kept), changed


def _rules(nodes, keep_all: bool) -> tuple[list[str], bool]:
    out, changed = [], False
    for node in nodes:
        if node.type == "qualified-rule" and (keep_all or values_ok(node.prelude)):
            body, did = _body(node.content, keep_all)
            out.append(f"{serialize(node.prelude, not keep_all).strip()} {{{body}}}")
            changed |= did
        elif node.type == "at-rule" and node.content is not None and (keep_all or (
                node.lower_at_keyword in AT_RULES and values_ok(node.prelude))):
            if node.lower_at_keyword.endswith("keyframes"):
                inner, did = _rules(tinycss2.parse_rule_list(node.content, True, True), keep_all)
            else:
                inner, did = _rules(tinycss2.parse_stylesheet(node.content, True, True), keep_all)
            prelude = serialize(node.prelude, not keep_all).strip()
            out.append(f"@{_name(node.lower_at_keyword)} {prelude} {{{' '.join(inner)}}}")
            changed |= did
        else:
            changed = True
            if keep_all and node.type != "error":
                out.append(serialize([node], strict=False))
    return out, changed


def _body(content, keep_all: bool) -> tuple[str, bool]:
    """A rule's block: its declarations, and nested rules (CSS Nesting) cleaned alike."""
    nodes = [n for n in tinycss2.parse_blocks_contents(content, True, True)]
    parts, changed = [], False
    for node in nodes:
        if node.type == "declaration" and (keep_all or declaration_ok(node)):
            parts.append(_declaration(node, keep_all))
        elif node.type in ("qualified-rule", "at-rule"):
            inner, did = _rules([node], keep_all)
            parts.extend(inner)
            changed |= did
        else:
            changed = True
    return "; ".join(parts), changed


def _declaration(node, keep_all: bool = False) -> str:
    important = " !important" if node.important else ""
    name = node.name if node.name.startswith("--") else node.lower_name
    return f"{_name(name)}: {serialize(node.value, not keep_all).strip()}{important}"


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


__all__ = ["clean_declarations", "clean_stylesheet", "clean_value", "serialize", "values_ok", "declaration_ok",
           "FUNCTIONS", "AT_RULES"]

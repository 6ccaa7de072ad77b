"""``<style>`` blocks under the output policy: cleaned by the rules of :mod:`.css`, and kept inside their output.

JupyterLab shows every output in one page, and a ``<style>`` block's rules apply to all of it: an
output could style JupyterLab's own elements, e.g. switch off the clipping of its output area
(``.jp-OutputArea-output, .lm-Widget { overflow: visible; contain: none }``) and then move an
invisible link over the whole window, so that the next click anywhere (the File menu) opens
another origin. No property list can stop that, since ``overflow: visible`` is harmless on the
output's own elements.

So every block the policy writes is one ``@scope { ... }`` rule (CSS Cascading 6; Chromium 118,
Safari 17.4, Firefox 146). Without a prelude its scoping root is the parent of the ``<style>``
element, and its rules style only elements inside that root: the output's own. Every top-level
selector is anchored below the root (``td`` becomes ``:scope td``), so the root itself, which is
JupyterLab's node when the block sits at the top of an output, is never styled either, and the
output area's clipping holds: a selector stays as written only if it is ``:scope``, a descendant
or child combinator and a compound (``:scope {`` and ``:scope , td`` are anchored too). A nested
rule (CSS Nesting) is relative to its parent, so it may hold ``&`` only as its first token and
never ``:scope`` (``div { :has(> &) {...} }`` selects the div's parent: the root); else it is dropped. A browser without ``@scope`` drops the whole block: the output
loses its colours, nothing else. ``@keyframes`` are written outside the scope (their names are
global in CSS, and they style nothing by themselves). A block that already is such a scope (the
policy's own writing) is read as its contents, so policing twice changes nothing.
"""

from __future__ import annotations

import tinycss2

from .css import AT_RULES, active, declaration, kept, serialize, values_ok

SCOPE = "@scope"


def clean_stylesheet(css: str, *, reference: bool = False) -> tuple[str, bool]:
    """``(canonical, removed)`` for a ``<style>`` block's text: one ``@scope`` rule (and the
    block's ``@keyframes`` before it) holding the qualified rules with their declarations that
    pass :mod:`.css`, and the kept at-rules cleaned alike; ``removed``: something
    :func:`~.css.active` was dropped. The result never holds ``<``, so it cannot end its
    ``<style>`` element. ``reference``: the text to compare with (active parts kept, unchecked),
    never emitted."""
    nodes = _unscoped(tinycss2.parse_stylesheet(css, skip_comments=True, skip_whitespace=True))
    keyframes = [n for n in nodes if n.type == "at-rule" and n.lower_at_keyword.endswith("keyframes")]
    frames, removed = _rules(keyframes, reference, top=False)
    rules, did = _rules([n for n in nodes if n not in keyframes], reference, top=True)
    scoped = [f"{SCOPE} {{\n" + "\n".join(rules) + "\n}"] if rules else []
    return "\n".join(frames + scoped), removed or did


def _unscoped(nodes) -> list:
    """``nodes`` with each ``@scope`` rule replaced by the rules inside it (its own prelude, if
    any, goes: the policy's scope is the output)."""
    out = []
    for node in nodes:
        if node.type == "at-rule" and node.lower_at_keyword == "scope" and node.content is not None:
            out += _unscoped(tinycss2.parse_stylesheet(node.content, skip_comments=True, skip_whitespace=True))
        else:
            out.append(node)
    return out


def _rules(nodes, reference: bool, top: bool) -> tuple[list[str], bool]:
    """The rules of a list, cleaned; ``top``: their selectors are anchored below the scope's
    root (:func:`_anchored`)."""
    out, removed = [], False
    for node in nodes:
        if node.type == "qualified-rule" and values_ok(node.prelude):
            if not top and not _nested_ok(node.prelude):
                continue  # it could style the root: dropped, as an unknown property is
            body, did = _body(node.content, reference)
            prelude = _anchored(node.prelude) if top else serialize(node.prelude).strip()
            out.append(f"{prelude} {{{body}}}")
            removed |= did
        elif node.type == "at-rule" and node.content is not None and node.lower_at_keyword in AT_RULES \
                and values_ok(node.prelude):
            frames = node.lower_at_keyword.endswith("keyframes")
            inner = (tinycss2.parse_rule_list(node.content, True, True) if frames
                     else _unscoped(tinycss2.parse_stylesheet(node.content, True, True)))
            inner, did = _rules(inner, reference, top and not frames)
            out.append(f"@{node.lower_at_keyword} {serialize(node.prelude).strip()} {{{' '.join(inner)}}}")
            removed |= did
        elif node.type != "error" and active(node):
            removed = True
            if reference:
                out.append(serialize([node], strict=False))
    return out, removed


def _body(content, reference: bool) -> tuple[str, bool]:
    """A rule's block: its declarations, and nested rules (CSS Nesting, relative to their
    parent: not anchored again) cleaned alike."""
    parts, removed = [], False
    for node in tinycss2.parse_blocks_contents(content, True, True):
        if node.type == "declaration":
            if kept(node, reference):
                parts.append(declaration(node, reference))
            removed |= active(node) and not kept(node, reference=False)
        elif node.type in ("qualified-rule", "at-rule"):
            inner, did = _rules([node], reference, top=False)
            parts.extend(inner)
            removed |= did
    return "; ".join(parts), removed


def _selectors(prelude) -> list[list]:
    """A selector list's selectors, each as the component values of its serialization (what
    the page parses), without whitespace or comments at either end."""
    selectors, current = [], []
    for token in list(prelude) + [None]:
        if token is None or (token.type == "literal" and token.value == ","):
            selectors.append(current)
            current = []
        else:
            current.append(token)
    return [tinycss2.parse_component_value_list(serialize(tokens).strip(), skip_comments=True)
            for tokens in selectors]


def _anchored(prelude) -> str:
    """A selector list with each selector below the scope's root: ``td, > th`` becomes
    ``:scope td, :scope > th``; one that already is ``:scope``, a combinator and a compound
    stays (the policy's own writing). ``:scope`` alone, which would match the root, becomes
    ``:scope :scope``, which matches nothing."""
    out = []
    for tokens in _selectors(prelude):
        text = serialize(tokens).strip()
        out.append(text if _below_scope(tokens) else f":scope {text}")
    return ", ".join(out)


def _below_scope(tokens) -> bool:
    """Whether a selector's component values are ``:scope``, a descendant or child combinator
    and then a compound: its subject is never the root (nor a sibling of it)."""
    if not _pseudo(tokens, 0, "scope"):
        return False
    rest = tokens[2:]
    combinator = bool(rest) and rest[0].type == "whitespace"
    rest = rest[1:] if combinator else rest
    if rest and rest[0].type == "literal" and rest[0].value == ">":
        combinator, rest = True, rest[1:]
        rest = rest[1:] if rest and rest[0].type == "whitespace" else rest
    return combinator and bool(rest) and not (rest[0].type == "whitespace" or (
        rest[0].type == "literal" and rest[0].value in (">", "+", "~")))


def _pseudo(tokens, i: int, name: str) -> bool:
    return (i + 1 < len(tokens) and tokens[i].type == "literal" and tokens[i].value == ":"
            and tokens[i + 1].type == "ident" and tokens[i + 1].lower_value == name)


def _nested_ok(prelude) -> bool:
    """Whether a nested rule's selectors stay below their parent (whose own selector is
    anchored below the scope's root): ``&`` only as a selector's first token (``:has(> &)``
    or ``:root &`` would select the parent's ancestors: the root), and no ``:scope``."""
    for tokens in _selectors(prelude):
        if not tokens or _reaches_up(tokens[1:] if tokens[0].type == "literal" and tokens[0].value == "&"
                                     else tokens):
            return False
    return True


def _reaches_up(tokens) -> bool:
    """Whether component values hold ``&`` or ``:scope``, in functions and blocks too."""
    for i, token in enumerate(tokens):
        if token.type == "literal" and token.value == "&" or _pseudo(tokens, i, "scope"):
            return True
        inner = getattr(token, "arguments", None)
        if inner is None and token.type.endswith("block"):
            inner = token.content
        if inner and _reaches_up(inner):
            return True
    return False


__all__ = ["clean_stylesheet", "SCOPE"]

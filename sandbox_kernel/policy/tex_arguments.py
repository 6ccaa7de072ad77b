"""The arguments of the MathJax macros that put them into CSS or MathML attributes.

MathJax 3.2's ``color`` package passes an unknown colour name to CSS as it is
(``ColorModel.getColorByName``); ``\\bbox[...]`` takes a colour, a padding and CSS declarations
(``border: ...``) that MathJax's ``safe`` extension filters by property, not by value
(``cursor: url(...)`` would pass); ``\\enclose{notation}[attributes]{...}`` sets MathML
attributes. So each of these macros is kept only when every argument it hands on is plain:

- a colour: a name (letters), ``#rgb``/``#rrggbb``, or a value of an explicit model that MathJax
  accepts (``[HTML]{FF0000}``, ``[rgb]{1,0,0}``, ``[RGB]{255,0,0}``, ``[gray]{0.5}``); for
  ``\\color``, ``\\textcolor``, ``\\colorbox``, ``\\fcolorbox`` (two colours), ``\\definecolor``
  (a name, a model, a value) and colortbl's ``\\rowcolor``, ``\\columncolor``, ``\\cellcolor``;
- ``\\bbox``'s options: colours, lengths, and ``border`` declarations of a length, a line style
  and a colour;
- ``\\enclose``'s notations (MathML ``menclose``'s names) and ``mathcolor``/``mathbackground``.

Anything else and the macro loses its backslash (:func:`.tex.police_tex`); so does one whose
``[...]`` option cannot be read here (braces inside it, which MathJax's ``GetBrackets`` accepts).
"""

from __future__ import annotations

import re

_GROUP = re.compile(r"\s*\{([^{}]*)\}")
_OPTION = re.compile(r"\s*\[([^\[\]{}]*)\]")
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_MODELS = {
    "HTML": re.compile(r"[0-9A-Fa-f]{6}"),
    "rgb": re.compile(rf"{_NUMBER}\s*,\s*{_NUMBER}\s*,\s*{_NUMBER}"),
    "RGB": re.compile(r"\d{1,3}\s*,\s*\d{1,3}\s*,\s*\d{1,3}"),
    "gray": re.compile(_NUMBER),
}
_PLAIN_COLOUR = re.compile(r"[A-Za-z]{1,30}|#[0-9A-Fa-f]{3}|#[0-9A-Fa-f]{6}")
_LENGTH = re.compile(rf"-?{_NUMBER}\s*(?:em|ex|px|pt|pc|mu|cm|mm|in)?")
_LINE_STYLES = frozenset({"solid", "dashed", "dotted", "double", "none", "groove", "ridge", "inset", "outset"})
NOTATIONS = frozenset({"longdiv", "actuarial", "phasorangle", "radical", "box", "roundedbox", "circle", "left",
                       "right", "top", "bottom", "updiagonalstrike", "downdiagonalstrike", "verticalstrike",
                       "horizontalstrike", "northeastarrow", "madruwb", "updiagonalarrow"})
COLOUR_ARGUMENTS = {"color": 1, "textcolor": 1, "colorbox": 1, "fcolorbox": 2, "rowcolor": 1, "columncolor": 1,
                    "cellcolor": 1}
"""Macros taking ``[model]`` and then that many colours."""
CHECKED = frozenset(COLOUR_ARGUMENTS) | {"definecolor", "bbox", "enclose"}


class _Unread(Exception):
    """An optional argument this module cannot read (one holding braces or brackets)."""


def _option(text: str, end: int) -> re.Match | None:
    """The ``[...]`` option at ``end``, or None when there is none. MathJax's ``GetBrackets``
    takes one whenever the next character but spaces is ``[``, and reads braces inside it
    (``[padding:9px{},...]``): such an option, which ``_OPTION`` cannot read, raises
    :class:`_Unread`, never counts as no option."""
    option = _OPTION.match(text, end)
    if option is None and text[end:].lstrip().startswith("["):
        raise _Unread
    return option


def arguments_ok(name: str, text: str, end: int) -> bool:
    """Whether the arguments after ``\\name`` (at ``end`` in ``text``) are plain (the module
    docstring); True for a macro without checked arguments. An option not read is not plain."""
    try:
        return _arguments_ok(name, text, end)
    except _Unread:
        return False


def _arguments_ok(name: str, text: str, end: int) -> bool:
    if name in COLOUR_ARGUMENTS:
        model = _option(text, end)
        end = model.end() if model else end
        for _ in range(COLOUR_ARGUMENTS[name]):
            colour = _GROUP.match(text, end)
            if colour is None or not colour_ok(model.group(1) if model else None, colour.group(1)):
                return False
            end = colour.end()
        return True
    if name == "definecolor":
        parts = []
        for _ in range(3):
            group = _GROUP.match(text, end)
            if group is None:
                return False
            parts.append(group.group(1).strip())
            end = group.end()
        return re.fullmatch(r"[A-Za-z]{1,30}", parts[0]) is not None and parts[1] in _MODELS and \
            colour_ok(parts[1], parts[2])
    if name == "bbox":
        options = _option(text, end)
        return options is None or all(_bbox_option(part.strip()) for part in options.group(1).split(","))
    if name == "enclose":
        notation = _GROUP.match(text, end)
        if notation is None or not set(re.split(r"[\s,]+", notation.group(1).strip())) <= NOTATIONS:
            return False
        attributes = _option(text, notation.end())
        return attributes is None or all(_enclose_attribute(part.strip()) for part in attributes.group(1).split(","))
    return True


def colour_ok(model: str | None, value: str) -> bool:
    """Whether ``value`` is a plain colour (in ``model``, when one is given)."""
    value = value.strip()
    if model is None:
        return _PLAIN_COLOUR.fullmatch(value) is not None
    pattern = _MODELS.get(model.strip())
    return pattern is not None and pattern.fullmatch(value) is not None


def _bbox_option(option: str) -> bool:
    if ":" in option:
        prop, _, value = option.partition(":")
        if not re.fullmatch(r"border(?:-(?:top|right|bottom|left))?", prop.strip()):
            return False
        words = value.split()
        return 0 < len(words) <= 3 and all(
            _LENGTH.fullmatch(w) or w in _LINE_STYLES or _PLAIN_COLOUR.fullmatch(w) for w in words)
    return _PLAIN_COLOUR.fullmatch(option) is not None or _LENGTH.fullmatch(option) is not None


def _enclose_attribute(attribute: str) -> bool:
    key, _, value = attribute.partition("=")
    return key.strip() in ("mathcolor", "mathbackground") and _PLAIN_COLOUR.fullmatch(value.strip().strip("\"'")) \
        is not None


__all__ = ["arguments_ok", "colour_ok", "CHECKED", "COLOUR_ARGUMENTS", "NOTATIONS"]

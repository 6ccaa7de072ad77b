"""Typed widget state: each standard widget model's synced traits, and state checked against them.

The table (``models.json``, written by ``scripts/widget_table.py`` from ipywidgets 8.1's
Python classes) gives, for every model of ``@jupyter-widgets/base`` 2.0, ``controls`` 2.0 and
``output`` 1.0, its version, its views and each synced trait's JSON type and *sink*: how its view
puts it into the page when not as text. Types:

``"str"``, ``"color"`` (a string), ``"bool"``, ``"int"``, ``"float"`` (JSON numbers; Python's
traitlets take ``True`` as 1 too), ``"scalar"`` (str, number, bool or null), ``"bytes"`` (a binary
buffer, never JSON), ``"date"``/``"datetime"``/``"time"`` (ipywidgets' dicts of ints), ``"output"``
(an nbformat output dict), ``"file"`` (a ``FileUpload`` file dict), ``"ref"`` (``"IPY_MODEL_<id>"``),
``{"ref": [model names]}``, ``{"enum": [...]}``, ``{"list": T}``, ``{"tuple": [T, ...]}``,
``{"union": [T, ...]}``, ``{"null": T}`` (T or None).

Sinks (read off the views of ipywidgets 8.1, ``packages/controls/src``): ``html`` (innerHTML:
``HTML``/``HTMLMath`` value), ``tex`` (text typeset by MathJax: ``Label`` value), ``description``
(innerHTML through ``inline_sanitize`` when ``description_allow_html``, else text; typeset either
way), ``css:<property>`` (style and layout traits, ``ColorsInput`` tags), ``classes``
(``_dom_classes``), ``icon``/``fa_icon`` (Font Awesome class names), ``media_format`` (``"url"``
makes ``Image``/``Video``/``Audio`` load their value as a URL), ``outputs`` (the ``Output``
widget's MIME bundles), ``link`` (``jslink``/``jsdlink`` endpoints, judged by the widget rules).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

MODEL_ID = re.compile(r"^(?!(constructor|prototype|hasOwnProperty|isPrototypeOf|propertyIsEnumerable|toString|"
                      r"toLocaleString|valueOf)$)[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$")
"""A comm or model id the rules pass (ipywidgets' are uuid4 hex): never ``__proto__``, a name of
``Object.prototype`` (the manager keeps models in plain objects by id) or a path."""
REF = re.compile(r"^IPY_MODEL_(?!(constructor|prototype|hasOwnProperty|isPrototypeOf|propertyIsEnumerable|"
                 r"toString|toLocaleString|valueOf)$)[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$")
CLASS_NAME = re.compile(r"^-?[_A-Za-z][_A-Za-z0-9\-]{0,100}$")
ICON = re.compile(r"^[A-Za-z0-9_\-]{0,100}$")
CLASS_KEYS = ("_model_module", "_model_module_version", "_model_name", "_view_module", "_view_module_version",
              "_view_name")
_DATE_KEYS = {"date": ("year", "month", "date"), "time": ("hours", "minutes", "seconds", "milliseconds"),
              "datetime": ("year", "month", "date", "hours", "minutes", "seconds", "milliseconds")}
_FILE_KEYS = {"name": "str", "type": "str", "size": "int", "last_modified": "int"}
BAD = object()
"""What a check returns for a value of the wrong type."""


@dataclass(frozen=True)
class ModelType:
    """One standard model's entry in the table.

    Attributes:
        module, name, version: what the widget manager loads (``_model_module`` ...).
        views: ``(view_module, view_module_version, view_name)`` its Python classes name.
        traits: ``{trait: {"type": T, "sink": S}}``, as in ``models.json``.
    """

    module: str
    name: str
    version: str
    views: tuple[tuple[str | None, str, str | None], ...]
    traits: dict[str, dict[str, Any]]


@functools.lru_cache(maxsize=1)
def table() -> dict[str, ModelType]:
    """``{"module:name": ModelType}`` for every standard model (``models.json``)."""
    raw = json.loads(resources.files(__package__).joinpath("models.json").read_text())
    return {key: ModelType(m["module"], m["name"], m["version"], tuple(tuple(v) for v in m["views"]), m["traits"])
            for key, m in raw["models"].items()}


def model_type(module: Any, name: Any) -> ModelType | None:
    """The table's entry for a model, or None when it is not a standard model."""
    return table().get(f"{module}:{name}") if isinstance(module, str) and isinstance(name, str) else None


def class_mismatch(model: ModelType, state: dict[str, Any]) -> str | None:
    """Why ``state``'s class keys do not name ``model`` and one of its views exactly (the
    version the manager loads, the view it creates); None when they do. A key left out is the
    JavaScript model's default, which is the standard one."""
    wanted = {"_model_module": model.module, "_model_name": model.name, "_model_module_version": model.version}
    for key, value in wanted.items():
        if key in state and state[key] != value:
            return f"{key} {state[key]!r}"
    keys = ("_view_module", "_view_module_version", "_view_name")
    for view in model.views:
        if all(key not in state or state[key] == value or (key == "_view_module_version" and view[0] is None)
               for key, value in zip(keys, view)):
            return None
    return "view " + ", ".join(f"{key}={state.get(key)!r}" for key in keys)


# -- types ---------------------------------------------------------------------------------------
def typed(kind: Any, value: Any) -> Any:
    """``value`` as a fresh copy if it has the table type ``kind``, else :data:`BAD`."""
    if isinstance(kind, str):
        return _simple(kind, value)
    if "null" in kind:
        return None if value is None else typed(kind["null"], value)
    if "enum" in kind:
        if isinstance(value, str):
            for choice in kind["enum"]:
                if choice.lower() == value.lower():
                    return choice  # CaselessStrEnum: the declared spelling
        return BAD
    if "ref" in kind:
        return _simple("ref", value)
    if "union" in kind:
        for option in kind["union"]:
            if (out := typed(option, value)) is not BAD:
                return out
        return BAD
    if not isinstance(value, (list, tuple)):
        return BAD
    kinds = [kind["list"]] * len(value) if "list" in kind else kind["tuple"]
    if len(kinds) != len(value):
        return BAD
    items = [typed(k, v) for k, v in zip(kinds, value)]
    return BAD if any(item is BAD for item in items) else items


def _simple(kind: str, value: Any) -> Any:
    if kind in ("str", "color"):
        return value if isinstance(value, str) else BAD
    if kind == "bool":
        return value if isinstance(value, bool) else BAD
    if kind == "int":
        return value if isinstance(value, int) else BAD
    if kind == "float":
        return value if isinstance(value, (int, float)) else BAD
    if kind == "scalar":
        return value if value is None or isinstance(value, (str, int, float)) else BAD
    if kind == "ref":
        return value if isinstance(value, str) and REF.match(value) else BAD
    if kind == "bytes":
        return bytes(value) if isinstance(value, (bytes, bytearray, memoryview)) else BAD
    if kind in _DATE_KEYS:
        if not isinstance(value, dict) or not all(isinstance(value.get(k), int) for k in _DATE_KEYS[kind]):
            return BAD
        return {k: value[k] for k in _DATE_KEYS[kind]}
    if kind == "file":
        if not isinstance(value, dict):
            return BAD
        out = {k: value[k] for k in _FILE_KEYS if k in value and _simple(_FILE_KEYS[k], value[k]) is not BAD}
        if isinstance(value.get("content"), (bytes, bytearray, memoryview)):
            out["content"] = bytes(value["content"])
        return out
    if kind == "output":
        return json_copy(value) if isinstance(value, dict) else BAD
    raise ValueError(f"unknown widget trait type {kind!r} in models.json")


def json_copy(value: Any) -> Any:
    """A fresh copy of JSON data (an nbformat output, a ``custom`` message's content)."""
    if isinstance(value, dict):
        return {str(k): json_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_copy(v) for v in value]
    return value


def ref_models(kind: Any) -> list[str] | None:
    """The model names a reference type allows (None: any model)."""
    if isinstance(kind, dict):
        if "ref" in kind:
            return kind["ref"]
        for inner in ("null", "list"):
            if inner in kind:
                return ref_models(kind[inner])
    return None


def refs(value: Any) -> list[str]:
    """Every ``"IPY_MODEL_<id>"`` id in a typed value."""
    if isinstance(value, str):
        return [value[len("IPY_MODEL_"):]] if REF.match(value) else []
    if isinstance(value, list):
        return [r for v in value for r in refs(v)]
    return []


def is_ref(kind: Any) -> bool:
    """Whether a table type holds widget references."""
    return kind == "ref" or (isinstance(kind, dict) and ("ref" in kind or any(
        is_ref(kind[k]) for k in ("null", "list") if k in kind) or any(is_ref(k) for k in kind.get("tuple", ()))))


__all__ = ["BAD", "ModelType", "table", "model_type", "class_mismatch", "typed", "refs", "ref_models", "is_ref",
           "CLASS_KEYS", "CLASS_NAME", "ICON", "MODEL_ID", "REF", "json_copy"]

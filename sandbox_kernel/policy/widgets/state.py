"""One widget model's state under the output policy: typed, then every rendered string policed.

:func:`police_state` takes the state (or part of it, from an ``update``) of a model that
:mod:`.types` knows and returns a fresh dict written here, never the input:

- a key the model does not sync is dropped; a value of the wrong type is dropped (the model keeps
  its previous value, or the view's default at ``comm_open``): a key, not the whole message, so an
  ordinary widget keeps working when one value is refused;
- every string a view renders other than as text is policed where it sits, in lists too, by the
  output policy: innerHTML (:meth:`OutputPolicy.html`), MathJax text (``tex_text``), HTML
  descriptions (``sanitize_html``), CSS values (``css_value``, parsed with tinycss2: a value that
  loads anything or does not parse is dropped), class names (identifiers only), Font Awesome icon
  names, ``format="url"`` (dropped: the value would be a URL the page loads), and the ``Output``
  widget's outputs (:meth:`OutputPolicy.bundle`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..css import own_class
from .media import police_media
from .types import BAD, CLASS_KEYS, CLASS_NAME, ICON, ModelType, json_copy, typed

if TYPE_CHECKING:
    from .. import OutputPolicy


@dataclass
class WidgetModel:
    """What the widget rules remember of one model (by comm_id / model_id).

    Attributes:
        type: its table entry; None for a model of a module the user allowed by name (its
            state then passes as the sandbox sent it).
        cls: ``(model_module, model_name)`` it was opened with.
        allow_html: its ``description_allow_html``; description: its last ``description``.
        extra: a link model's ``source``/``target``.
        media: an ``Image``/``Video``/``Audio`` model's ``format`` and last ``value`` (:mod:`.media`).
    """

    type: ModelType | None
    cls: tuple[Any, Any] = (None, None)
    allow_html: bool = False
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    media: dict[str, Any] = field(default_factory=dict)


def police_state(policy: OutputPolicy, model: WidgetModel, state: dict[str, Any], *,
                 opening: bool) -> tuple[dict[str, Any], bool]:
    """``(state, changed)``: ``state`` (all of it at ``comm_open``/``update_states``, part of it
    in an ``update``) as the policy lets it reach the page. Class keys pass only when
    ``opening`` (checked by the rules); ``changed`` says anything was dropped or rewritten."""
    if model.type is None:
        return json_copy(state), False
    out: dict[str, Any] = {}
    changed = False
    for key, value in state.items():
        spec = model.type.traits.get(key)
        if key in CLASS_KEYS and not opening or spec is None:
            changed = True
            continue
        clean = typed(spec["type"], value)
        if clean is BAD:
            changed = True
            continue
        clean, did = _sink(policy, spec.get("sink"), clean)
        changed |= did
        if clean is not BAD:
            out[key] = clean
    changed |= _description(policy, model, out)
    return out, changed


def _description(policy: OutputPolicy, model: WidgetModel, out: dict[str, Any]) -> bool:
    """``description``: HTML through ``inline_sanitize`` when ``description_allow_html``, else
    text; MathJax typesets it either way (controls/src/widget_description.ts updateDescription).
    When ``description_allow_html`` changes, the description is sent again, policed as it will
    now be shown."""
    if "description_allow_html" in out:
        model.allow_html = out["description_allow_html"]
    if isinstance(out.get("description"), str):
        model.description = out["description"]
    elif "description_allow_html" not in out:
        return False
    if model.type is None or "description" not in model.type.traits:
        return False
    given = out.get("description", model.description)
    if model.allow_html:
        out["description"], changed = policy.sanitize_html(given)
    else:
        out["description"], changed = policy.tex_text(given)
    return changed


def _sink(policy: OutputPolicy, sink: str | None, value: Any) -> tuple[Any, bool]:
    """``(value, changed)`` with every string at ``sink`` policed; :data:`BAD` drops the key."""
    if sink is None or sink in ("link", "description"):
        return value, False
    if isinstance(value, list):
        items = [_sink(policy, sink, v) for v in value]
        return [v for v, _ in items if v is not BAD], any(did for _, did in items)
    if sink == "outputs":
        return _output(policy, value)
    if not isinstance(value, str):
        return value, False
    if sink == "html":
        return policy.html(value)
    if sink == "tex":
        return policy.tex_text(value)
    if sink.startswith("css:"):
        clean = policy.css_value(sink[4:], value)  # canonical (quotes may change): only a drop is a change
        return (BAD, True) if clean is None else (clean, False)
    if sink == "classes":  # none of the page's own classes (Lumino's position: fixed ones, MathJax's)
        return (value, False) if CLASS_NAME.match(value) and own_class(value) else (BAD, True)
    if sink == "icon":  # each name becomes the class fa-<name>
        names = [n for n in value.split() if ICON.match(n)]
        return " ".join(names), names != value.split()
    if sink == "fa_icon":  # className = 'fa fa-' + icon: one name, or it adds classes of its own
        return (value, False) if ICON.match(value) else ("", True)
    if sink == "media_format":
        return (BAD, True) if value.strip().lower() == "url" else (value, False)
    raise ValueError(f"unknown widget sink {sink!r} in models.json")


def binary_paths(model: WidgetModel, paths: Any, buffers: tuple[bytes, ...]) -> tuple[list, tuple, bool]:
    """``(paths, buffers, dropped)``: the ``buffer_paths`` (and their buffers) that name a
    binary trait of the model's table: ``[key]`` for a ``bytes`` trait, ``["value", i, "content"]``
    for a ``FileUpload``'s files. Any path for a model of a module the user allowed by name."""
    kept_paths, kept, dropped = [], [], False
    for i, path in enumerate(paths if isinstance(paths, list) else []):
        if i < len(buffers) and isinstance(path, list) and path and _binary(model, path):
            kept_paths.append(list(path))
            kept.append(buffers[i])
        else:
            dropped = True
    return kept_paths, tuple(kept), dropped


def binary_state(policy: OutputPolicy, model: WidgetModel, state: dict[str, Any], paths: Any,
                 buffers: tuple[bytes, ...]) -> tuple[list, tuple, bool]:
    """:func:`binary_paths`, then a media widget's ``format`` and value policed together
    (:func:`.media.police_media`; ``state``, already policed, is changed in place)."""
    paths, buffers, dropped = binary_paths(model, paths, buffers)
    paths, buffers, changed = police_media(policy, model, state, paths, buffers)
    return paths, buffers, dropped or changed


def _binary(model: WidgetModel, path: list) -> bool:
    if model.type is None:
        return True
    spec = model.type.traits.get(path[0]) if isinstance(path[0], str) else None
    if spec is None:
        return False
    if spec["type"] in ("bytes", {"null": "bytes"}):
        return len(path) == 1
    return spec["type"] == {"list": "file"} and len(path) == 3 and isinstance(path[1], int) and path[2] == "content"


# -- the Output widget ---------------------------------------------------------------------------
def _output(policy: OutputPolicy, output: Any) -> tuple[Any, bool]:
    """One nbformat output dict of an ``Output`` widget (output/src/output.ts renders them in a
    trusted output area), rebuilt from its known fields; other output types are dropped."""
    kind = output.get("output_type") if isinstance(output, dict) else None
    if kind in ("display_data", "execute_result") and isinstance(output.get("data"), dict):
        metadata = output.get("metadata") if isinstance(output.get("metadata"), dict) else {}
        policed = policy.bundle(output["data"], metadata)
        out = {"output_type": kind, "data": policed.data, "metadata": policed.metadata}
        if kind == "execute_result":
            count = output.get("execution_count")
            out["execution_count"] = count if isinstance(count, int) and not isinstance(count, bool) else None
        return out, policed.changed
    if kind == "stream" and output.get("name") in ("stdout", "stderr"):
        text = _text(output.get("text"))
        return ({"output_type": kind, "name": output["name"], "text": text}, False) if text is not None else (BAD, True)
    if kind == "error":
        trace = output.get("traceback")
        lines = [line for line in trace if isinstance(line, str)] if isinstance(trace, list) else []
        return {"output_type": kind, "ename": str(output.get("ename", "")), "evalue": str(output.get("evalue", "")),
                "traceback": lines}, False
    return BAD, True


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    return None


__all__ = ["WidgetModel", "binary_paths", "binary_state", "police_state"]

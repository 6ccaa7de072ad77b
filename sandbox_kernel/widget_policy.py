"""Widget rules: comm traffic from the sandbox under the output policy.

ipywidgets' views put some model state into the page as HTML: ``HTML``/``HTMLMath`` assign
``value`` to ``innerHTML`` unsanitized, ``description`` is HTML when ``description_allow_html``
is set, the ``Output`` widget renders its ``outputs`` as trusted MIME bundles, ``Image``/
``Video``/``Audio`` with ``format="url"`` make the browser fetch, and style models set CSS
values (``background: url(...)``). A widget model from another module runs that module's
JavaScript. So, unless the policy is ``trust``:

- the sandbox may open comms only to ``allowed_comm_targets`` (``jupyter.widget``), and only
  widget models whose model and view modules are in ``allowed_widget_modules`` (the standard
  ``@jupyter-widgets/base``, ``controls``, ``output``); others are refused with one note;
- that state is policed at ``comm_open``, on every ``update``/``echo_update``, and in the
  ``update_states`` reply on the ``jupyter.widget.control`` comm (how a reloaded page gets
  every widget's state);
- an update may not change a model's class (``_model_name``, ``_view_module``, ...);
- messages on comms the page does not know (refused, or never opened) are dropped.

Message shapes: the Jupyter widget messaging protocol, version 2
(https://github.com/jupyter-widgets/ipywidgets/blob/main/packages/schema/messages.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .events import Comm
from .policy import OutputPolicy

WIDGET_TARGET = "jupyter.widget"
CONTROL_TARGET = "jupyter.widget.control"
HTML_VALUE_MODELS = frozenset({"HTMLModel", "HTMLMathModel"})
MEDIA_MODELS = frozenset({"ImageModel", "VideoModel", "AudioModel"})
CLASS_KEYS = ("_model_module", "_model_module_version", "_model_name", "_view_module", "_view_module_version",
              "_view_name")
_CSS_LOADS = ("url(", "image-set(", "image(", "expression(", "@import")


@dataclass
class _Model:
    """What the rules remember of one widget model (by comm_id)."""

    name: str
    allow_html: bool = False
    description: str = ""


class WidgetRules:
    """Polices one sandbox session's comm traffic to the page (see the module's docstring).

    Args:
        policy: the session's output policy (its sanitizer, modules and targets).
    """

    def __init__(self, policy: OutputPolicy) -> None:
        self.policy = policy
        self._models: dict[str, _Model] = {}
        self._frontend: dict[str, str] = {}  # comm_id -> target, for comms the page opened
        self._refused: set[str] = set()

    def from_frontend(self, msg_type: str, content: dict[str, Any]) -> None:
        """Remember a comm the page opens (or closes) in the sandbox: its replies are allowed."""
        comm_id = content.get("comm_id")
        if msg_type == "comm_open":
            self._frontend[comm_id] = content.get("target_name", "")
        elif msg_type == "comm_close":
            self._frontend.pop(comm_id, None)
            self._models.pop(comm_id, None)

    def from_sandbox(self, event: Comm) -> tuple[Comm | None, bool, str | None]:
        """``(event to show or None, changed, refusal note or None)`` for a comm message from
        the sandbox."""
        if self.policy.trusts:
            return event, False, None
        comm_id = event.content.get("comm_id")
        if event.msg_type == "comm_open":
            return self._open(event, comm_id)
        if comm_id in self._refused or (comm_id not in self._models and comm_id not in self._frontend):
            if event.msg_type == "comm_close":
                self._refused.discard(comm_id)
            return None, False, None
        if event.msg_type == "comm_close":
            self._models.pop(comm_id, None)
            return event, False, None
        return self._message(event, comm_id)

    # -- comm_open ---------------------------------------------------------------------------
    def _open(self, event: Comm, comm_id: str) -> tuple[Comm | None, bool, str | None]:
        target = event.content.get("target_name", "")
        if target not in self.policy.comm_targets:
            self._refused.add(comm_id)
            return None, False, (f"[the sandbox opened a comm to '{target}', which the output policy refuses; "
                                 f"{self.policy.option('allowed_comm_targets', target)} allows it]\n")
        data = event.content.get("data") or {}
        state = data.get("state") or {}
        if target == WIDGET_TARGET:
            refusal = self._refusal(state)
            if refusal is not None:
                self._refused.add(comm_id)
                return None, False, refusal
        model = self._models[comm_id] = _Model(str(state.get("_model_name", "")))
        clean, changed = self._state(model, state)
        if not changed:
            return event, False, None
        return _with_data(event, {**data, "state": clean}), True, None

    def _refusal(self, state: dict[str, Any]) -> str | None:
        """The note refusing a widget whose model module (required) or view module (if any) is
        not allowed; None when it may open."""
        for key in ("_model_module", "_view_module"):
            module = state.get(key)
            if (module is not None or key == "_model_module") and module not in self.policy.widget_modules:
                return (f"[a widget from the module '{module}' was not shown: the output policy allows only the "
                        f"standard ipywidgets; {self.policy.option('allowed_widget_modules', module)} allows it]\n")
        return None

    # -- comm_msg ----------------------------------------------------------------------------
    def _message(self, event: Comm, comm_id: str) -> tuple[Comm | None, bool, str | None]:
        data = event.content.get("data") or {}
        method = data.get("method")
        model = self._models.get(comm_id)
        if model is not None and method in ("update", "echo_update") and isinstance(data.get("state"), dict):
            state = {k: v for k, v in data["state"].items() if k not in CLASS_KEYS}
            clean, changed = self._state(model, state)
            changed |= len(state) != len(data["state"])
            return (_with_data(event, {**data, "state": clean}), True, None) if changed else (event, False, None)
        if self._frontend.get(comm_id) == CONTROL_TARGET and method == "update_states":
            return self._states(event, data)
        return event, False, None

    def _states(self, event: Comm, data: dict[str, Any]) -> tuple[Comm, bool, str | None]:
        """The control comm's ``update_states``: every widget's state, for a reloaded page."""
        states, changed, refusal = {}, False, None
        for model_id, entry in (data.get("states") or {}).items():
            state = entry.get("state") or {}
            why = self._refusal({"_model_module": entry.get("model_module"), **state})
            if why is not None:
                refusal, changed = why, True
                self._refused.add(model_id)
                continue
            model = self._models[model_id] = _Model(str(entry.get("model_name", "")))
            clean, did = self._state(model, state)
            states[model_id] = {**entry, "state": clean} if did else entry
            changed |= did
        if not changed:
            return event, False, None
        paths = data.get("buffer_paths") or []
        keep = [i for i, path in enumerate(paths) if path and path[0] in states]
        new = _with_data(event, {**data, "states": states, "buffer_paths": [paths[i] for i in keep]})
        return replace(new, buffers=tuple(event.buffers[i] for i in keep if i < len(event.buffers))), True, refusal

    # -- state -------------------------------------------------------------------------------
    def _state(self, model: _Model, state: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """``(state, changed)``: one model's state (or part of it) under the policy."""
        out, changed = dict(state), False
        if model.name in HTML_VALUE_MODELS and isinstance(state.get("value"), str):
            out["value"], did = self.policy.html(state["value"])
            changed |= did
        if "description_allow_html" in state:
            model.allow_html = bool(state["description_allow_html"])
        if isinstance(state.get("description"), str):
            model.description = state["description"]
        if model.allow_html and ("description" in state or "description_allow_html" in state):
            out["description"], did = self.policy.sanitizer.html(model.description)
            changed |= did
        if model.name == "OutputModel" and isinstance(state.get("outputs"), list):
            out["outputs"], did = self._outputs(state["outputs"])
            changed |= did
        if model.name in MEDIA_MODELS and state.get("format") == "url":
            out["format"], changed = "png", True  # the value is then image bytes, never a URL to fetch
        if model.name.endswith(("StyleModel", "LayoutModel")):
            for key, value in state.items():
                if isinstance(value, str) and any(s in value.lower() for s in _CSS_LOADS):
                    del out[key]
                    changed = True
        return out, changed

    def _outputs(self, outputs: list[Any]) -> tuple[list[Any], bool]:
        """An ``Output`` widget's outputs (nbformat output dicts) under the policy."""
        result, changed = [], False
        for output in outputs:
            if isinstance(output, dict) and isinstance(output.get("data"), dict):
                policed = self.policy.bundle(output["data"], output.get("metadata"))
                output = {**output, "data": policed.data, "metadata": policed.metadata}
                changed |= policed.changed
            result.append(output)
        return result, changed


def _with_data(event: Comm, data: dict[str, Any]) -> Comm:
    return replace(event, content={**event.content, "data": data})


__all__ = ["WidgetRules", "WIDGET_TARGET", "CONTROL_TARGET"]

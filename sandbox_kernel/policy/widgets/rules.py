"""Widget rules: comm traffic from the sandbox under the output policy.

ipywidgets' views put model state into the page: ``HTML``/``HTMLMath`` assign ``value`` to
``innerHTML``, descriptions and ``Label`` values are typeset by MathJax (descriptions are HTML when
``description_allow_html``), style and layout traits become CSS, ``Image``/``Video``/``Audio`` with
``format="url"`` make the browser fetch, the ``Output`` widget renders MIME bundles, and link
models (``jslink``/``jsdlink``) copy values between widgets in the browser. A model from another
module runs that module's JavaScript. So, unless the policy is ``trust``:

- the sandbox may open comms only to ``allowed_comm_targets`` (``jupyter.widget``), and only
  widgets whose model and view modules are in ``allowed_widget_modules``; a model of the standard
  modules must be one of the models of ipywidgets 8.1 with its own view and version
  (:mod:`.types`), else it is refused, with one note;
- each standard model's state is typed against its table and every string a view renders is
  policed (:mod:`.state`), at ``comm_open``, on every ``update``/``echo_update``, and in
  the ``update_states`` reply on the ``jupyter.widget.control`` comm (how a reloaded page gets
  every widget's state), judged there on the ``model_module``/``model_name`` of each entry, which
  is what the widget manager loads;
- a link model may only set traits that its target widget shows as text or numbers
  (:meth:`WidgetRules._link_refusal`); its target must be a standard widget the rules already
  know. Else the link is refused (at open) or its new endpoints dropped (in an update);
- ``buffer_paths`` may only name traits the table says are binary;
- an update may not change a model's class; messages on comms the page does not know are dropped;
  ``custom`` messages pass with their content;
- what reaches the page is always a message written here, never the sandbox's own.

Models of a module the user allowed by name pass with their state as sent (the user trusts that
module's JavaScript). Message shapes: the Jupyter widget messaging protocol, version 2
(https://github.com/jupyter-widgets/ipywidgets/blob/main/packages/schema/messages.md).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ...core.events import Comm
from ..core import STANDARD_WIDGET_MODULES
from .media import police_states_media
from .state import WidgetModel, binary_paths, binary_state, police_state
from .types import CLASS_KEYS, MODEL_ID, class_mismatch, is_ref, json_copy, model_type, ref_models, refs

if TYPE_CHECKING:
    from .. import OutputPolicy

WIDGET_TARGET = "jupyter.widget"
CONTROL_TARGET = "jupyter.widget.control"
STANDARD_MODULES = frozenset(STANDARD_WIDGET_MODULES)
LINK_MODELS = frozenset({"LinkModel", "DirectionalLinkModel"})
NOT_LINKED = frozenset({"description_allow_html", "msg_id"})
"""Traits no link may set though their views show no string: the switch that makes a description
HTML, and the ``Output`` widget's ``msg_id`` (which request's outputs it captures)."""
Verdict = tuple[Comm | None, bool, str | None]


class WidgetRules:
    """Polices one sandbox session's comm traffic to the page (see the module's docstring).

    Args:
        policy: the session's output policy (its functions, modules and targets).
    """

    def __init__(self, policy: OutputPolicy) -> None:
        self.policy = policy
        self._models: dict[str, WidgetModel] = {}
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

    def from_sandbox(self, event: Comm) -> Verdict:
        """``(event to show or None, changed, refusal note or None)`` for a comm message from
        the sandbox (IOPub ``comm_open``/``comm_msg``/``comm_close``)."""
        if self.policy.trusts:
            return event, False, None
        if not isinstance(event.content, dict):
            return None, True, None
        comm_id = event.content.get("comm_id")
        if not isinstance(comm_id, str) or not MODEL_ID.match(comm_id):
            return None, True, None
        if event.msg_type == "comm_open":
            return self._open(event, comm_id)
        if comm_id in self._refused or (comm_id not in self._models and comm_id not in self._frontend):
            if event.msg_type == "comm_close":
                self._refused.discard(comm_id)
            return None, False, None
        if event.msg_type == "comm_close":
            self._models.pop(comm_id, None)
            return Comm("comm_close", {"comm_id": comm_id, "data": {}}), False, None
        return self._message(event, comm_id)

    # -- comm_open ---------------------------------------------------------------------------
    def _open(self, event: Comm, comm_id: str) -> Verdict:
        target = event.content.get("target_name", "")
        target = target if isinstance(target, str) else repr(target)
        if target not in self.policy.comm_targets:
            self._refused.add(comm_id)
            return None, False, (f"[the sandbox opened a comm to '{target}', which the output policy refuses; "
                                 f"{self.policy.option('allowed_comm_targets', target)} allows it]\n")
        data = event.content.get("data") if isinstance(event.content.get("data"), dict) else {}
        if target != WIDGET_TARGET:  # a target the user allowed by name: its messages are that extension's
            return _comm(event, "comm_open", comm_id, json_copy(data), target), False, None
        state = data.get("state") if isinstance(data.get("state"), dict) else {}
        model, clean, changed, refusal = self._admit(comm_id, state)
        if model is None:
            return None, changed, refusal
        paths, buffers, dropped = binary_state(self.policy, model, clean, data.get("buffer_paths"), event.buffers)
        new = _comm(event, "comm_open", comm_id, {"state": clean, "buffer_paths": paths}, target)
        return replace(new, buffers=buffers), changed or dropped, None

    def _admit(self, model_id: str, state: dict[str, Any], known: WidgetModel | None = None,
               ) -> tuple[WidgetModel | None, dict, bool, str | None]:
        """``(model, state, changed, None)`` for a new model's whole state (its class keys name
        it), now known to the rules; ``(None, {}, changed, note)`` when it is refused. ``known``:
        the model of that class the page already holds, to which the manager applies the state
        (``update_states``): what the rules remember of it (a media model's format and value,
        ``description_allow_html`` and the description, a link's ends) carries over, so the state
        is policed as an ``update`` of it would be."""
        model, refusal = self._model(state.get("_model_module"), state.get("_model_name"), state)
        if model is not None and known is not None:
            model = replace(model, allow_html=known.allow_html, description=known.description,
                            extra=dict(known.extra), media=dict(known.media))
        clean, changed = police_state(self.policy, model, state, opening=True) if model else ({}, False)
        changed |= model is not None and self._wrong_refs(model, clean)
        if model is not None and (refusal := self._link_refusal(model, clean)) is not None:
            model, changed = None, True
        if model is None:
            self._refused.add(model_id)
            return None, {}, changed, refusal
        self._models[model_id] = model
        return model, clean, changed, None

    def _model(self, module: Any, name: Any, state: dict[str, Any]) -> tuple[WidgetModel | None, str | None]:
        """``(model, None)`` for a widget that may open, or ``(None, refusal note)``."""
        for key, given in (("_model_module", module), ("_view_module", state.get("_view_module"))):
            given = given if isinstance(given, str) or given is None else repr(given)
            if (given is not None or key == "_model_module") and given not in self.policy.widget_modules:
                return None, (f"[a widget from the module '{given}' was not shown: the output policy allows only the "
                              f"standard ipywidgets; {self.policy.option('allowed_widget_modules', given)} allows "
                              "it]\n")
        view_module = state.get("_view_module")
        if not isinstance(module, str) or not isinstance(view_module, (str, type(None))):
            return None, self._unknown(module, name)
        if module not in STANDARD_MODULES or (view_module is not None and view_module not in STANDARD_MODULES):
            return WidgetModel(None, (module, name)), None  # a module the user allowed by name
        kind = model_type(module, name)
        if kind is None or class_mismatch(kind, {**state, "_model_module": module, "_model_name": name}) is not None:
            return None, self._unknown(module, name)
        return WidgetModel(kind, (module, name)), None

    def _unknown(self, module: Any, name: Any) -> str:
        return (f"[a widget model '{name}' of '{module}' was not shown: the output policy shows only the standard "
                f"models of ipywidgets 8.1, each with its own view and version; "
                f"{self.policy.option('output_policy', 'trust')} shows any]\n")

    def _wrong_refs(self, model: WidgetModel, state: dict[str, Any]) -> bool:
        """Drop a reference to a known model of another class than its trait names (``layout``
        only a ``LayoutModel``, ``style`` the widget's style model): the view would draw that
        model where a style or layout goes. True if one was dropped."""
        dropped = False
        for key in [k for k in state if model.type is not None and ref_models(model.type.traits[k]["type"])]:
            allowed = ref_models(model.type.traits[key]["type"])
            known = [self._models.get(i) for i in refs(state[key])]
            if any(m is not None and m.cls[1] not in allowed for m in known):
                del state[key]
                dropped = True
        return dropped

    # -- links -------------------------------------------------------------------------------
    def _link_refusal(self, model: WidgetModel, state: dict[str, Any]) -> str | None:
        """The note refusing a link model whose endpoints may carry markup, URLs or CSS into a
        widget; None when it may link. A ``DirectionalLinkModel`` sets its ``target``; a
        ``LinkModel`` both ends (controls/src/widget_link.ts ``updateValue``). The end set must
        be a standard widget the rules know (links are made after their widgets) and the trait
        one it shows as text or numbers: no sink, no reference, no bytes, not ``_*``, not
        ``description_allow_html``."""
        if model.type is None or model.type.name not in LINK_MODELS:
            return None
        model.extra.update({k: state[k] for k in ("source", "target") if k in state})
        ends = ("source", "target") if model.type.name == "LinkModel" else ("target",)
        for end in ends:
            pair = model.extra.get(end)
            if not pair:
                continue
            target = self._models.get(pair[0][len("IPY_MODEL_"):])
            spec = target.type.traits.get(pair[1]) if target is not None and target.type is not None else None
            if spec is None or pair[1].startswith("_") or pair[1] in NOT_LINKED or "sink" in spec \
                    or is_ref(spec["type"]) or "bytes" in str(spec["type"]) or "output" in str(spec["type"]):
                what = f"'{pair[1]}' of " + (f"a {target.type.name}" if spec is not None else "an unknown widget")
                return (f"[a widget link (jslink/jsdlink) to {what} was not made: the output policy lets links set "
                        f"only what a standard widget shows as text or numbers; "
                        f"{self.policy.option('output_policy', 'trust')} allows it]\n")
        return None

    # -- comm_msg ----------------------------------------------------------------------------
    def _message(self, event: Comm, comm_id: str) -> Verdict:
        data = event.content.get("data") if isinstance(event.content.get("data"), dict) else {}
        method = data.get("method")
        model = self._models.get(comm_id)
        if model is not None:
            if method in ("update", "echo_update") and isinstance(data.get("state"), dict):
                return self._update(event, comm_id, model, method, data)
            if method == "custom":
                new = _comm(event, "comm_msg", comm_id, {"method": "custom", "content": json_copy(data.get("content"))})
                return replace(new, buffers=event.buffers), False, None
            return None, True, None
        frontend = self._frontend.get(comm_id)
        if frontend == CONTROL_TARGET:
            return self._states(event, comm_id, data) if method == "update_states" else (None, True, None)
        if frontend == WIDGET_TARGET:  # the page asked for a model it lacks (base-manager _loadFromKernelModels)
            return self._requested(event, comm_id, method, data)
        return _comm(event, "comm_msg", comm_id, json_copy(data)), False, None  # another comm the page opened

    def _requested(self, event: Comm, comm_id: str, method: Any, data: dict[str, Any]) -> Verdict:
        """The reply to a ``request_state`` on a ``jupyter.widget`` comm the page opened: its
        ``update`` carries a whole state from which the manager makes the model, so it is judged
        as a ``comm_open``."""
        if method not in ("update", "echo_update") or not isinstance(data.get("state"), dict):
            return None, True, None
        model, clean, changed, refusal = self._admit(comm_id, data["state"])
        if model is None:
            return None, changed, refusal
        paths, buffers, dropped = binary_state(self.policy, model, clean, data.get("buffer_paths"), event.buffers)
        new = _comm(event, "comm_msg", comm_id, {"method": method, "state": clean, "buffer_paths": paths})
        return replace(new, buffers=buffers), changed or dropped, None

    def _update(self, event: Comm, comm_id: str, model: WidgetModel, method: str, data: dict[str, Any]) -> Verdict:
        clean, changed = police_state(self.policy, model, data["state"], opening=False)
        changed |= self._wrong_refs(model, clean)
        refusal = None
        if model.type is not None and model.type.name in LINK_MODELS and ("source" in clean or "target" in clean):
            before = dict(model.extra)
            if (refusal := self._link_refusal(model, clean)) is not None:  # the link keeps its old ends
                model.extra, changed = before, True
                clean = {k: v for k, v in clean.items() if k not in ("source", "target")}
        paths, buffers, dropped = binary_state(self.policy, model, clean, data.get("buffer_paths"), event.buffers)
        new = _comm(event, "comm_msg", comm_id, {"method": method, "state": clean, "buffer_paths": paths})
        return replace(new, buffers=buffers), changed or dropped, refusal

    def _states(self, event: Comm, comm_id: str, data: dict[str, Any]) -> Verdict:
        """The control comm's ``update_states``: every widget's state, for a reloaded page
        (base-manager ``_loadFromKernel``: ``new_model`` from each entry's ``model_module``,
        ``model_name`` and ``model_module_version``, then ``put_buffers`` at ``[id, ...path]``).
        Links are judged last, once the widgets they name are known."""
        entries = data.get("states") if isinstance(data.get("states"), dict) else {}
        order = sorted(entries, key=lambda i: isinstance(entries[i], dict)
                       and str(entries[i].get("model_name")) in LINK_MODELS)
        states, changed, refusal = {}, False, None
        for model_id in order:
            entry, why = self._entry(model_id, entries[model_id])
            if entry is None:
                changed, refusal = True, refusal or why
                self._refused.add(model_id)
                continue
            states[model_id], did = entry
            changed |= did
        kept_paths, kept_buffers = [], []
        paths = data.get("buffer_paths") if isinstance(data.get("buffer_paths"), list) else []
        for i, path in enumerate(paths):
            ok = isinstance(path, list) and len(path) > 2 and isinstance(path[0], str) and path[0] in states \
                and path[1] == "state"
            if ok and i < len(event.buffers) and binary_paths(self._models[path[0]], [path[2:]], (b"",))[0]:
                kept_paths.append(list(path))
                kept_buffers.append(event.buffers[i])
            else:
                changed = True
        kept_paths, kept_buffers, did = police_states_media(self.policy, self._models, states, kept_paths, kept_buffers)
        new = _comm(event, "comm_msg", comm_id, {"method": "update_states", "states": states,
                                                 "buffer_paths": kept_paths})
        return replace(new, buffers=tuple(kept_buffers)), changed or did, refusal

    def _entry(self, model_id: Any, entry: Any) -> tuple[tuple[dict[str, Any], bool] | None, str | None]:
        """``((entry, changed), None)`` for one ``update_states`` entry, or ``(None, note)``. The
        entry's ``model_*`` keys are what the manager loads: the state's own class keys must agree,
        and a model the page may already hold keeps its class (the manager applies the state to it
        with ``set_state``, at every reconnect: the entry is policed as an update of that model)."""
        if not isinstance(model_id, str) or not MODEL_ID.match(model_id) or not isinstance(entry, dict) \
                or not isinstance(entry.get("state"), dict):
            return None, None
        cls = {key: entry[key[1:]] for key in ("_model_module", "_model_name", "_model_module_version")
               if entry.get(key[1:]) is not None}
        state = entry["state"]
        known = self._models.get(model_id)
        if any(key in state and state[key] != value for key, value in cls.items()) or (
                known is not None and known.cls != (cls.get("_model_module"), cls.get("_model_name"))):
            return None, self._unknown(cls.get("_model_module"), cls.get("_model_name"))
        model, clean, changed, refusal = self._admit(model_id, {**state, **cls}, known)
        if model is None:
            return None, refusal
        for key in cls:
            if key not in state:
                clean.pop(key, None)
        return ({**{k[1:]: v for k, v in cls.items()}, "state": clean}, changed), None


def _comm(event: Comm, msg_type: str, comm_id: str, data: dict[str, Any], target: str | None = None) -> Comm:
    """A comm message written here: only the spec's fields, and the protocol ``version``."""
    content: dict[str, Any] = {"comm_id": comm_id, "data": data}
    if target is not None:
        content["target_name"] = target
    version = event.metadata.get("version") if isinstance(event.metadata, dict) else None
    return Comm(msg_type, content, {"version": version} if isinstance(version, str) else {}, ())


__all__ = ["WidgetRules", "WIDGET_TARGET", "CONTROL_TARGET", "CLASS_KEYS"]

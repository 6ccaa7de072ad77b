"""What the sandbox puts in replies, as the page may see it: the ``execute_reply``'s payloads and
``user_expressions``, ``history_reply`` rows, and the debugger's replies and events.

The sandbox wrote all of it, so each is rewritten as a closed world, like an output: only the
shapes the messaging spec and the Debug Adapter Protocol give, with the types they give, are kept;
every MIME bundle (the pager's ``page``, an evaluated expression, a variable the debugger renders)
passes the output policy; anything else is dropped.
Specs: https://jupyter-client.readthedocs.io/en/latest/messaging.html#payloads-deprecated and
https://microsoft.github.io/debug-adapter-protocol/specification
"""

from __future__ import annotations

import json
from typing import Any

from ..policy import OutputPolicy

DEBUG_EVENTS = frozenset({"initialized", "stopped", "continued", "terminated", "exited", "thread", "breakpoint"})
"""The debugger events relayed to the page: those JupyterLab's debugger acts on (``initialized``,
``stopped``, ``continued``, ``terminated``) and the protocol's other state changes it may. The
rest (``output``, which carries the debuggee's output, ``module``, debugpy's own) are dropped."""

RICH_DEBUG_COMMANDS = frozenset({"richInspectVariables"})
"""Debugger requests whose reply body is a MIME bundle (``{"data", "metadata"}``) that JupyterLab
renders with its renderers (the variable viewer)."""


# -- what a door answers when the sandbox cannot (no capability, not started, failed) ----------
def no_completion(cursor_pos: int) -> dict[str, Any]:
    """A ``complete_reply``'s content with no matches."""
    return {"status": "ok", "matches": [], "cursor_start": cursor_pos, "cursor_end": cursor_pos, "metadata": {}}


def not_found() -> dict[str, Any]:
    """An ``inspect_reply``'s content that found nothing."""
    return {"status": "ok", "found": False, "data": {}, "metadata": {}}


def judged(code: str) -> dict[str, Any]:
    """An ``is_complete_reply``'s content by IPython's own judgement of ``code`` (as ipykernel's)."""
    from IPython.core.inputtransformer2 import TransformerManager

    status, indent = TransformerManager().check_complete(code)
    return {"status": status, **({"indent": " " * indent} if indent else {})}


def no_history() -> dict[str, Any]:
    """A ``history_reply``'s content with no rows."""
    return {"status": "ok", "history": []}


def debug_error(request: dict[str, Any], message: str) -> dict[str, Any]:
    """A Debug Adapter Protocol error response to ``request`` (a ``debug_request``'s content)."""
    return {"type": "response", "request_seq": request.get("seq"), "command": request.get("command"),
            "success": False, "message": message, "body": {}}


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def payload(items: tuple[dict[str, Any], ...], policy: OutputPolicy) -> list[dict[str, Any]]:
    """The execute_reply payloads the page may get: ``page`` (its bundle policed),
    ``set_next_input``, ``edit`` and ``ask_exit``, each with only its own typed fields."""
    kept: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        source = item.get("source")
        if source == "page" and isinstance(item.get("data"), dict):
            policed = policy.bundle(item["data"], {})
            if policed.data:
                kept.append({"source": "page", "data": policed.data, "start": item["start"] if _int(
                    item.get("start")) else 0})
        elif source == "set_next_input" and isinstance(item.get("text"), str):
            kept.append({"source": "set_next_input", "text": item["text"], "replace": item.get("replace") is True})
        elif source == "edit" and isinstance(item.get("filename"), str) and _int(item.get("line_number")):
            kept.append({"source": "edit", "filename": item["filename"], "line_number": item["line_number"]})
        elif source == "ask_exit":
            kept.append({"source": "ask_exit", "keepkernel": item.get("keepkernel") is True})
    return kept


def user_expressions(values: dict[str, Any], asked: dict[str, str] | None, policy: OutputPolicy) -> dict[str, Any]:
    """The ``user_expressions`` of an execute_reply, for the names ``asked`` only: each ``ok``
    value's bundle policed, each ``error`` as its name, value and traceback text."""
    kept: dict[str, Any] = {}
    for name in asked or {}:
        value = values.get(name)
        if not isinstance(value, dict):
            continue
        if value.get("status") == "ok" and isinstance(value.get("data"), dict):
            policed = policy.bundle(value["data"], value.get("metadata"))
            kept[name] = {"status": "ok", "data": policed.data, "metadata": policed.metadata}
        elif value.get("status") == "error":
            traceback = value.get("traceback")
            kept[name] = {"status": "error", "ename": _text(value.get("ename")), "evalue": _text(value.get("evalue")),
                          "traceback": [line for line in traceback if isinstance(line, str)]
                          if isinstance(traceback, list) else []}
    return kept


def _history_row(row: Any) -> list[Any] | None:
    if not isinstance(row, (list, tuple)) or len(row) != 3 or not (_int(row[0]) and _int(row[1])):
        return None
    entry = row[2]
    if isinstance(entry, str):
        return [row[0], row[1], entry]
    if isinstance(entry, (list, tuple)) and len(entry) == 2 and isinstance(entry[0], str) and \
            (entry[1] is None or isinstance(entry[1], str)):
        return [row[0], row[1], [entry[0], entry[1]]]
    return None


def history(reply: dict[str, Any]) -> dict[str, Any]:
    """A ``history_reply``'s content with only well-formed rows: ``[session, line, input]`` or
    ``[session, line, [input, output]]`` (text, shown as text by consoles)."""
    rows = reply.get("history") if reply.get("status") == "ok" else None
    kept = [row for row in map(_history_row, rows if isinstance(rows, list) else []) if row is not None]
    return {**no_history(), "history": kept}


def _json(value: Any) -> Any:
    """``value`` as plain JSON (objects, arrays, strings, numbers, booleans, null)."""
    return json.loads(json.dumps(value, default=str))


def debug_reply(request: dict[str, Any], reply: dict[str, Any], policy: OutputPolicy) -> dict[str, Any]:
    """A ``debug_reply``'s content for the frontend's ``request``: plain JSON, with the bundle of a
    rich variable view (:data:`RICH_DEBUG_COMMANDS`) policed."""
    kept = _json(reply) if isinstance(reply, dict) else {}
    body = kept.get("body")
    if request.get("command") in RICH_DEBUG_COMMANDS and isinstance(body, dict):
        policed = policy.bundle(body.get("data") if isinstance(body.get("data"), dict) else {}, body.get("metadata"))
        kept["body"] = {"data": policed.data, "metadata": policed.metadata}
    return kept


def debug_event(content: dict[str, Any]) -> dict[str, Any] | None:
    """A ``debug_event``'s content as plain JSON, or None when it is not one of
    :data:`DEBUG_EVENTS`."""
    if not isinstance(content, dict) or content.get("type") != "event" or content.get("event") not in DEBUG_EVENTS:
        return None
    return _json(content)

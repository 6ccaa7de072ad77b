"""From events to IOPub messages.

:func:`to_iopub` gives the ``(msg_type, content)`` of the IOPub message the Jupyter messaging
spec defines for each event (``stream``, ``display_data``, ``update_display_data``,
``execute_result``, ``clear_output``, ``error``, ``comm_*``, ``debug_event``).
"""

from __future__ import annotations

from typing import Any

from .events import ClearOutput, Comm, DebugEvent, Display, Error, Event, Stream


def to_iopub(event: Event) -> tuple[str, dict[str, Any]]:
    """The IOPub ``(msg_type, content)`` for ``event`` (buffers of a Comm travel separately)."""
    if isinstance(event, Stream):
        return "stream", {"name": event.name, "text": event.text}
    if isinstance(event, Display):
        content: dict[str, Any] = {"data": event.data, "metadata": event.metadata}
        if event.display_id is not None:
            content["transient"] = {"display_id": event.display_id}
        if event.update:
            return "update_display_data", content
        if event.execution_count is not None:
            return "execute_result", {**content, "execution_count": event.execution_count}
        return "display_data", content
    if isinstance(event, ClearOutput):
        return "clear_output", {"wait": event.wait}
    if isinstance(event, Error):
        return "error", {"ename": event.ename, "evalue": event.evalue, "traceback": event.traceback}
    if isinstance(event, Comm):
        return event.msg_type, event.content
    if isinstance(event, DebugEvent):
        return "debug_event", event.content
    raise TypeError(f"not an event: {event!r}")


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
"""The MIME type of an ipywidgets view: ``{"model_id": comm_id, ...}``."""


def error_event(exc: BaseException) -> Error:
    """A short error output for an infrastructure failure: its class and message, no traceback
    of our internals."""
    name = type(exc).__name__
    return Error(name, str(exc), [f"\x1b[0;31m{name}\x1b[0m: {exc}"])


def publish(session: Any, socket: Any, event: Event, parent: dict[str, Any] | None, ident: Any = None) -> None:
    """Send ``event`` as its IOPub message on ``socket`` with jupyter_client's ``session``
    (``Session.send``), as a reply to ``parent`` (the frontend's request; None: none); a Comm's
    metadata and buffers travel with it. ``ident``: the IOPub topic (ipykernel's ``_topic``)."""
    msg_type, content = to_iopub(event)
    comm = isinstance(event, Comm)
    session.send(socket, msg_type, content, parent or {}, ident=ident, metadata=event.metadata if comm else None,
                 buffers=list(event.buffers) if comm else None)

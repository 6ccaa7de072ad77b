"""From events to IOPub messages, and the per-cell output budget.

:func:`to_iopub` gives the ``(msg_type, content)`` of the IOPub message the Jupyter messaging
spec defines for each event (``stream``, ``display_data``, ``update_display_data``,
``execute_result``, ``clear_output``, ``error``, ``comm_*``).
"""

from __future__ import annotations

from typing import Any

from .events import ClearOutput, Comm, Display, Error, Event, Stream
from .traits import format_bytes


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
    raise TypeError(f"not an event: {event!r}")


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
"""The MIME type of an ipywidgets view: ``{"model_id": comm_id, ...}``."""


def without_widget_view(event: Display) -> Display | None:
    """``event`` without its widget view, for a frontend that cannot reach the widget's model
    (the comm stays in the sandbox); None when nothing else is left to show."""
    data = {mime: value for mime, value in event.data.items() if mime != WIDGET_VIEW}
    if not data:
        return None
    return Display(data, event.metadata, event.display_id, event.update, event.execution_count)


def error_event(exc: BaseException) -> Error:
    """A short error output for an infrastructure failure: its class and message, no traceback
    of our internals."""
    name = type(exc).__name__
    return Error(name, str(exc), [f"\x1b[0;31m{name}\x1b[0m: {exc}"])


def _size(event: Event) -> int:
    if isinstance(event, Stream):
        return len(event.text.encode("utf-8", "surrogatepass"))
    if isinstance(event, Display):
        return sum(len(v) if isinstance(v, str) else len(repr(v)) for v in event.data.values())
    return 0


class OutputBudget:
    """Cuts a cell's output at ``max_bytes`` (0: no limit) and says how much was dropped.
    ``scope`` names whose output the marker speaks of ("of this cell").

    ``admit(event)`` returns the events to publish: the event itself while under the budget,
    a one-line marker when the budget is first exceeded, nothing afterwards. Errors, comms and
    clear_output always pass. ``summary()`` gives the closing marker, if anything was dropped.
    """

    def __init__(self, max_bytes: int, setting: str = "SandboxKernel.max_output_bytes",
                 scope: str = "of this cell") -> None:
        self.max_bytes = max_bytes
        self.scope = scope
        self.setting = setting  # the option named in the closing marker
        self.used = 0
        self.dropped = 0

    def admit(self, event: Event) -> list[Event]:
        size = _size(event)
        if not self.max_bytes or not size:
            return [event]
        if self.dropped == 0 and self.used + size <= self.max_bytes:
            self.used += size
            return [event]
        if self.dropped:
            self.dropped += size
            return []
        admitted: list[Event] = []
        room = self.max_bytes - self.used
        if isinstance(event, Stream) and room > 0:  # show the part that fits
            head = event.text.encode("utf-8", "surrogatepass")[:room].decode("utf-8", "ignore")
            admitted.append(Stream(event.name, head))
            size -= len(head.encode("utf-8", "surrogatepass"))
        self.used = self.max_bytes
        self.dropped = size
        admitted.append(Stream("stderr", f"\n[output limit of {format_bytes(self.max_bytes)} reached: "
                                         f"further output {self.scope} is dropped]\n"))
        return admitted

    def summary(self) -> Stream | None:
        if not self.dropped:
            return None
        return Stream("stderr", f"[{format_bytes(self.dropped)} of output dropped "
                                f"({self.dropped} bytes); raise {self.setting} to see more]\n")

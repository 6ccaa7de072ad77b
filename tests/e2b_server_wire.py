"""What E2B's code interpreter sends, line by line and in time, for ``tests/e2b_server.py``.

The shapes are those of e2b-dev/code-interpreter ``template/server`` (``messaging.py``,
``stream.py``, ``api/models/*.py``), checked by hand against that server running unmodified on
127.0.0.1 (see docs/how-to/e2b.md). Each ``POST /execute`` answers newline-delimited JSON,
``json.dumps`` of the pydantic model with ``exclude_none`` (so ``", "`` and ``": "`` separators):

* ``{"type": "number_of_executions", "execution_count": N}`` when the kernel publishes
  ``execute_input``: the kernel took the request;
* ``{"type": "stdout"|"stderr", "text", "timestamp"}``, the timestamp being the IOPub message's
  ``header.date`` in ISO 8601;
* ``{"type": "result", "text", "html", ..., "extra": {...}, "is_main_result"}``, known MIME
  types as fields in the model's order, quotes around ``text`` stripped, the rest in ``extra``;
* ``{"type": "error", "name", "value", "traceback"}``, the kernel's traceback list joined with
  ``""`` (its entries carry no newline between them); only the first error of an execution;
* ``{"type": "keepalive"}`` after ``KEEPALIVE_INTERVAL`` (5) seconds without output;
* ``{"type": "end_of_execution"}`` last, always.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

KEEPALIVE_INTERVAL = 5.0
"""Seconds between keepalive lines of a silent execution (``messaging.py``)."""

RESULT_FIELDS = {
    "text/plain": "text",
    "text/html": "html",
    "text/markdown": "markdown",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "text/latex": "latex",
    "application/json": "json",
    "application/javascript": "javascript",
    "e2b/data": "data",  # E2B's own formatters (template/startup_scripts): a DataFrame's data,
    "e2b/chart": "chart",  # and a matplotlib figure's parsed chart, next to its image/png
}
"""Jupyter MIME type -> field of the server's ``Result`` model, in the model's field order."""

END_OF_EXECUTION = b'{"type": "end_of_execution"}\n'
"""The last line of every stream (``stream.py`` writes it by hand, after the generator ends)."""

RESTART_LOST = [("WebSocketError", "The connections was lost, rerun the code to get the results"),
                ("UnexpectedEndOfExecution", "Connection to the execution was closed before the execution "
                                             "was finished")]
"""The errors of an execution running when its context is restarted or removed: the server
closes its websocket to Jupyter (sic: "connections")."""


@dataclass
class Timings:
    """When E2B's server does what, in seconds (measured on 127.0.0.1, see docs/explanation/benchmarks.md).

    Attributes:
        interrupt_latency: from a client closing an ``/execute`` stream to the kernel's SIGINT.
            The server releases the context at once and interrupts in the background (its
            ``asyncio.shield(self.interrupt())`` is cancelled with the request), so an execution
            sent meanwhile runs first and may be hit by the interrupt meant for the closed one:
            as a ``KeyboardInterrupt`` error, or, before the kernel published ``execute_input``,
            never answered. Measured 20–120 ms (Jupyter's ``POST /api/kernels/{id}/interrupt``).
        restart_warmup: after ``POST /contexts/{id}/restart`` answers, how long the fresh
            kernel takes to answer its first execution (measured 0.44–0.88 s; none when the
            execution is sent 2 s later).
        dead_restart: after a kernel's death is reported (``ContextRestarting``), how long
            Jupyter takes to start the new one; executions sent meanwhile are lost.
    """

    interrupt_latency: float = 0.05
    restart_warmup: float = 0.8
    dead_restart: float = 0.5


def timestamp(date: Any = None) -> str:
    """ISO 8601 of an IOPub header's ``date`` (a datetime, or a string), or of now in UTC."""
    if date is None:
        date = datetime.datetime.now(datetime.timezone.utc)
    return date if isinstance(date, str) else date.isoformat()


def stream_event(name: str, text: str, date: Any = None) -> dict:
    """A ``stdout``/``stderr`` line (``api/models/logs.py``)."""
    return {"type": name, "text": text, "timestamp": timestamp(date)}


def error_event(name: str, value: str, traceback: str = "") -> dict:
    """An ``error`` line (``api/models/error.py``)."""
    return {"type": "error", "name": name, "value": value, "traceback": traceback}


def result_event(bundle: dict, is_main_result: bool) -> dict:
    """A ``result`` line from a Jupyter MIME bundle, as ``api/models/result.py`` builds it:
    fields in the model's order, ``text`` without surrounding quotes, ``extra`` always there."""
    data = dict(bundle)
    fields: dict[str, Any] = {field: data.pop(mime, None) for mime, field in RESULT_FIELDS.items()}
    text = fields["text"]
    if text and ((text.startswith("'") and text.endswith("'")) or (text.startswith('"') and text.endswith('"'))):
        fields["text"] = text[1:-1]
    event = {"type": "result", **{k: v for k, v in fields.items() if v is not None}}
    event.update(extra=data, is_main_result=is_main_result)
    return event


def iopub_to_event(msg: dict) -> dict | None:
    """The line one IOPub message (Jupyter messaging spec) becomes, or None (``status``,
    ``clear_output``, ``update_display_data``, ``comm_*`` are not forwarded)."""
    msg_type, content = msg["msg_type"], msg["content"]
    if msg_type == "stream":
        return stream_event(content["name"], content["text"], msg["header"].get("date"))
    if msg_type in ("display_data", "execute_result"):
        return result_event(content["data"], msg_type == "execute_result")
    if msg_type == "error":
        return error_event(content["ename"], content["evalue"], "".join(content["traceback"]))
    if msg_type == "execute_input":
        return {"type": "number_of_executions", "execution_count": content["execution_count"]}
    return None

"""The Jupyter messages a kernel-client backend reads: IOPub messages as events, the statuses
of replies, and a channel reader that does not miss a message.
Spec: https://jupyter-client.readthedocs.io/en/latest/messaging.html
"""

from __future__ import annotations

import contextlib
import queue
from typing import Any

import zmq.asyncio

from ...core.events import ClearOutput, Comm, DebugEvent, Display, Error, Event, Stream

COMM_TYPES = ("comm_open", "comm_msg", "comm_close")

REPLY_STATUS = {"ok": "ok", "error": "error", "aborted": "aborted", "abort": "aborted"}
"""An execute_reply's status as the messaging spec names it. Some kernels (bash_kernel, on an
interrupt) say ``"abort"``, the name older versions of the spec used; anything else counts as
an error."""

KERNEL_ARGS = ("--Kernel._execute_sleep=0",)
"""Options for the ipykernel inside a sandbox: ipykernel sleeps 0.5 ms before every
execute_reply, which the relay does not need (it waits for IOPub idle)."""


def history_args(path: str) -> tuple[str, ...]:
    """The sandbox kernel's options for IPython's history database at ``path`` (a path inside
    the sandbox, or ``":memory:"``: kept for the sandbox's life only), which answers
    ``history_request`` (Up-arrow in consoles, ``%history``)."""
    return (f"--HistoryManager.hist_file={path}",)


QUIET_KERNEL_ENV = {"PYDEVD_DISABLE_FILE_VALIDATION": "1"}
"""The sandbox kernel's environment: debugpy (imported by ipykernel at start) otherwise writes a
"frozen modules" warning on the kernel's stderr, which ipykernel forwards as a ``stream`` of
whatever request is current, so under load it showed in the first cell."""


def event_from_iopub(msg: dict[str, Any]) -> Event | None:
    """The event for one IOPub message, or None for messages that carry no output
    (``status``, ``execute_input``, ...). The sandbox wrote the message: a field of the wrong
    type is made one of the right type (a stream's name other than ``stdout`` is ``stderr``, a
    non-string text is its JSON; a ``transient`` that is not an object is ignored), never raised on."""
    kind, content = msg["header"]["msg_type"], msg["content"]
    if not isinstance(content, dict):
        content = {}
    if kind == "stream":
        return Stream("stdout" if content.get("name") == "stdout" else "stderr", _text(content.get("text", "")))
    if kind in ("display_data", "update_display_data", "execute_result"):
        transient = content.get("transient")
        return Display(
            data=content.get("data", {}),
            metadata=content.get("metadata", {}),
            display_id=transient.get("display_id") if isinstance(transient, dict) else None,
            update=kind == "update_display_data",
            execution_count=content.get("execution_count") if kind == "execute_result" else None,
        )
    if kind == "clear_output":
        return ClearOutput(wait=content.get("wait") is True)
    if kind == "error":
        traceback = content.get("traceback")
        return Error(_text(content.get("ename", "")), _text(content.get("evalue", "")),
                     [_text(line) for line in traceback] if isinstance(traceback, list) else [])
    if kind == "debug_event":
        return DebugEvent(content)
    if kind in COMM_TYPES:
        return Comm(kind, content, msg.get("metadata", {}), tuple(bytes(b) for b in msg.get("buffers", [])))
    return None


def _text(value: Any) -> str:
    """``value`` if it is a string, else its JSON (what a sandbox sent where text belongs)."""
    if isinstance(value, str):
        return value
    import json

    return json.dumps(value, default=repr)


RECEIVE_RECHECK_S = 1.0
"""Seconds a channel reader waits on a ZMQ socket before it checks the socket again (see
:func:`receive`)."""


async def receive(channel: Any) -> dict[str, Any]:
    """The next message on ``channel``, an AsyncKernelClient's channel.

    A ZMQ socket signals new messages through an edge-triggered file descriptor, and pyzmq's
    asyncio wrapper can miss an edge for good: measured here, about 1 run in 10 of the recovery
    after a dropped message (probes sent on shell while replies arrive) left a shell reply
    unread with the socket's ``EVENTS`` still ``POLLIN``, both with jupyter_client's
    ``get_msg()`` and with ``recv_multipart()``. So a ZMQ channel is polled again every
    :data:`RECEIVE_RECHECK_S` seconds (each poll asks libzmq itself first): a missed edge costs
    at most that, instead of a cell that never ends.

    A message that already waits (libzmq's ``EVENTS`` says ``POLLIN``) is read at once, without
    ``get_msg``'s poll: its future, poller and timer cost 0.14 ms of the 0.18 ms a message took
    to read here, and a cell brings the wrapper five (busy, execute_input, its result, idle, the
    reply), mostly in a burst once the sandbox's kernel is done.
    """
    socket = getattr(channel, "socket", None)
    if not isinstance(socket, zmq.asyncio.Socket):  # the gateway's channels
        return await channel.get_msg()
    while True:
        if socket.get(zmq.EVENTS) & zmq.POLLIN:
            return await channel._recv()  # jupyter_client's read and deserialize (IOPubChannel's: counted)
        with contextlib.suppress(queue.Empty):
            return await channel.get_msg(timeout=RECEIVE_RECHECK_S)

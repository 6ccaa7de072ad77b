"""What comes back for one request, relayed as events: its IOPub outputs until ``status: idle``,
then its reply as an :class:`~sandbox_kernel.core.events.Outcome`.
Spec: https://jupyter-client.readthedocs.io/en/latest/messaging.html#execute
"""

from __future__ import annotations

from ...core.errors import MessageDropped
from ...core.events import Emit, Error, Outcome, Stream
from .message_bound import RESYNCED, Request
from .messages import REPLY_STATUS, event_from_iopub


async def relay_outputs(request: Request, emit: Emit, note: str) -> None:
    """Emit the request's IOPub outputs until its ``status: idle`` (or, when a dropped message
    took that with it, until the recovery says all has arrived: RESYNCED); ``note`` is the line
    that says, once per request, that a message over the bound was dropped."""
    while True:
        msg = await request.iopub.get()
        kind = msg["header"]["msg_type"]
        if msg is RESYNCED or kind == "status" and msg["content"]["execution_state"] == "idle":
            if request.dropped:
                tell_dropped(request, emit, note)
            return
        event = event_from_iopub(msg)
        if request.timed_out and isinstance(event, Error) and event.ename == "KeyboardInterrupt":
            continue
        if event is not None:
            emit(event)


def tell_dropped(request: Request, emit: Emit, note: str) -> None:
    """Say once per request, in its cell, that a message over the bound was dropped."""
    if not request.told:
        request.told = True
        emit(Stream("stderr", note))


async def relay_reply(request: Request, emit: Emit, note: str) -> Outcome:
    """:func:`relay_outputs`, then the ``execute_reply`` as the Outcome (status as the spec
    names it, payloads and user_expressions as sent; a reply lost over the bound is an error
    ``MessageDropped``)."""
    await relay_outputs(request, emit, note)
    try:
        reply = (await request.reply)["content"]
    except MessageDropped as exc:  # the reply's status is unknown
        tell_dropped(request, emit, note)
        return Outcome("error", None, Error("MessageDropped", str(exc), []))
    error, status = None, REPLY_STATUS.get(reply.get("status"), "error")
    if status == "error":
        error = Error(reply.get("ename", ""), reply.get("evalue", ""), list(reply.get("traceback", [])))
    payload, expressions = reply.get("payload"), reply.get("user_expressions")
    return Outcome(status, reply.get("execution_count"), error,
                   payload=tuple(payload) if isinstance(payload, list) else (),
                   user_expressions=expressions if isinstance(expressions, dict) else {})

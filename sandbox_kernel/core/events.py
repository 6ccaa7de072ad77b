"""Events: what a backend reports while it runs a cell.

Every backend turns its own output (IOPub messages of a Jupyter kernel, callbacks of the
E2B SDK) into these values and hands them, in order and as they arrive, to the ``emit``
callback given to :meth:`~sandbox_kernel.backends.base.Backend.execute`. The kernel turns
them into IOPub messages (:func:`sandbox_kernel.core.iopub.to_iopub`); the magic shows them
with IPython's display machinery. Nothing about a backend leaks past this module.

Names follow the Jupyter messaging spec
(https://jupyter-client.readthedocs.io/en/latest/messaging.html#messages-on-the-iopub-pub-sub-channel).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class Stream:
    """Text on the sandbox's stdout or stderr (IOPub ``stream``)."""

    name: Literal["stdout", "stderr"]
    text: str


@dataclass(frozen=True)
class SandboxReplaced(Stream):
    """The sandbox had stopped (or was gone) and a fresh one replaced it before this cell: its
    state, files and widgets are lost. A backend emits it instead of an ordinary ``Stream``, so
    the session knows without reading text; it is shown as its stderr ``text``, which says why."""


@dataclass(frozen=True)
class Display:
    """A rich output: IOPub ``display_data``, ``update_display_data`` or ``execute_result``.

    Attributes:
        data: the MIME bundle, ``{mime_type: value}``; binary types (``image/png``) are
            base64 text, JSON types are JSON values. Kept whole: unknown MIME types survive.
        metadata: the bundle's metadata, ``{mime_type or key: value}``.
        display_id: the id from ``display(..., display_id=...)``, or None.
        update: True for ``update_display_data`` (replace the output with ``display_id``).
        execution_count: set only for the cell's ``execute_result`` (its last expression).
    """

    data: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)
    display_id: str | None = None
    update: bool = False
    execution_count: int | None = None


@dataclass(frozen=True)
class ClearOutput:
    """IOPub ``clear_output``; with ``wait`` the clearing happens at the next output."""

    wait: bool = False


@dataclass(frozen=True)
class Error:
    """An exception raised by the user's code (IOPub ``error``): data, not a failure of ours.

    Attributes:
        ename: the exception's class name, e.g. ``"ZeroDivisionError"``.
        evalue: its message.
        traceback: the formatted traceback, one string per frame (may hold ANSI colours).
    """

    ename: str
    evalue: str
    traceback: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Comm:
    """A comm message from the sandbox's kernel (IOPub ``comm_open``/``comm_msg``/``comm_close``).

    Carries ipywidgets' traffic. ``content`` is the message content as the messaging spec
    gives it (``comm_id``, ``data``, and ``target_name`` for ``comm_open``); ``buffers`` are
    the message's binary buffers.
    """

    msg_type: Literal["comm_open", "comm_msg", "comm_close"]
    content: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)
    buffers: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class Outcome:
    """What :meth:`Backend.execute` returns when the cell has finished.

    Attributes:
        status: ``"ok"``, ``"error"`` (the user's code raised) or ``"aborted"``.
        execution_count: the sandbox's execution counter after this cell, or None if the
            backend has none.
        error: the error, when ``status == "error"``.
        payload: the ``execute_reply``'s payloads as the sandbox sent them (``{"source": "page",
            "data": bundle, "start": 0}``, ``set_next_input``, ``edit``, ``ask_exit``); empty for a
            backend without ``capabilities.payloads``. Untrusted: the session polices them.
        user_expressions: the ``execute_reply``'s ``{name: {"status": "ok", "data", "metadata"} |
            {"status": "error", "ename", "evalue", "traceback"}}``, untrusted likewise.
    """

    status: Literal["ok", "error", "aborted"]
    execution_count: int | None = None
    error: Error | None = None
    payload: tuple[dict[str, Any], ...] = ()
    user_expressions: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DebugEvent:
    """A debugger event of the sandbox's kernel (IOPub ``debug_event``): ``content`` is a Debug
    Adapter Protocol event, ``{"type": "event", "seq": n, "event": "stopped", "body": {...}}``.
    It comes outside any cell (to the backend's comm handler) and is policed like output."""

    content: dict[str, Any]


Event = Stream | Display | ClearOutput | Error | Comm | DebugEvent
"""Any value a backend hands to ``emit``."""

Emit = Callable[[Event], None]
"""The callback a backend calls with each event, in order, as it arrives."""

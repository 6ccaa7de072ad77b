"""What the cell shows of the egress proxy's decisions: one line per refused host and port (or per
refusal of what named no host), once per cell, naming the option entry that would allow it (when
one would), on stderr."""

from __future__ import annotations

import logging
from typing import Any

from ...core.events import Emit, Stream
from .rules import as_address, suggestion

_log = logging.getLogger(__name__)


def refusal_line(event: dict[str, Any]) -> str:
    """The note for one ``refused`` event: ``host``, ``port``, ``reason``, ``allowable``; or
    ``what`` and ``reason`` for what named no host the proxy could read (another protocol, a
    malformed target)."""
    if event.get("what"):
        return f"egress: refused {event['what']} ({event.get('reason')})\n"
    host, port = str(event.get("host")), int(event.get("port") or 0)
    address = as_address(host)
    shown = f"[{host}]" if address is not None and address.version == 6 else host
    line = f"egress: refused {shown}:{port} ({event.get('reason')})"
    if event.get("allowable"):
        line += f"; to allow it, add {suggestion(host, port)!r} to allow_hosts"
    return line + "\n"


class RefusalNotes:
    """Shows the proxy's refusals in the running cell (:meth:`begin` .. :meth:`end`); outside a
    cell they are logged only."""

    def __init__(self) -> None:
        self._emit: Emit | None = None
        self._shown: set[object] = set()

    def begin(self, emit: Emit) -> None:
        self._emit, self._shown = emit, set()

    def end(self) -> None:
        self._emit = None

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "ended":
            _log.warning("the egress proxy stopped: the sandbox cannot reach any host until it restarts")
            if self._emit is not None:
                self._emit(Stream("stderr", "egress: the proxy stopped; no host can be reached until the sandbox "
                                            "restarts\n"))
            return
        if kind == "failed" and self._emit is not None:
            self._emit(Stream("stderr", f"egress: the proxy did not start ({event.get('reason')}); no host can be "
                                        "reached\n"))
        if kind != "refused":
            return
        line = refusal_line(event)
        _log.info("%s", line.rstrip())
        key = line if event.get("what") else (str(event.get("host")), int(event.get("port") or 0))
        if self._emit is None or key in self._shown:
            return
        self._shown.add(key)
        self._emit(Stream("stderr", line))

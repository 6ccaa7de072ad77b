"""What ``%sandbox status`` and ``%sandbox list`` show.

The data (:func:`status_info`: plain, JSON-able dicts) is kept apart from its views
(:class:`StatusView`, :class:`ListView`: text and HTML); :class:`sandbox_kernel.frontdoors.magics.widgets.StatusPanel`
is the widget view on the same dicts, and shows these as its text fallback.
"""

from __future__ import annotations

import html
from typing import Any

from .session import Session


def format_uptime(seconds: float | None) -> str:
    """``3725.2`` → ``"1:02:05"``; None (stopped) → ``"-"``."""
    if seconds is None:
        return "-"
    total = int(seconds)
    return f"{total // 3600}:{total // 60 % 60:02d}:{total % 60:02d}"


def status_info(session: Session) -> dict[str, Any]:
    """One session's status: its sandbox's (:meth:`SandboxSession.status
    <sandbox_kernel.session.session.SandboxSession.status>`: backend, sandbox_id, limits, ...,
    capabilities) plus the session's name, state (running/stopped), uptime in seconds and cells run."""
    info = session.sandbox.status()
    started = info.pop("started")
    info.update(session=session.name, state="running" if started else "stopped", uptime_s=session.uptime(),
                cells=session.cells, capabilities=info.pop("capabilities"))
    return info


def refresh_paused(session: Session, submit: Any, timeout: float = 5.0) -> None:
    """Ask a backend that declares the ``pause`` capability (e2b) which of its session's
    sandboxes are paused, so the status shows them (``describe()["paused_sandboxes"]``); best
    effort, up to ``timeout`` s. ``submit(coroutine)`` runs it on the magic's loop thread and
    returns a future."""
    if session.sandbox.capabilities.pause:
        try:
            submit(session.sandbox.paused_sandboxes()).result(timeout)
        except Exception:  # noqa: BLE001 - the status shows what it knows
            pass


def paused_note(session: Session) -> str | None:
    """One line naming the session's paused sandboxes and how to resume one, or None."""
    paused = session.sandbox.describe().get("paused_sandboxes")
    if not paused:
        return None
    return (f"Paused sandboxes of session {session.name!r}: {', '.join(paused)} "
            f"(resume one: %%sandbox --backend {session.sandbox.name} --attach ID)")


def _value(key: str, value: Any) -> str:
    if key == "uptime_s":
        return format_uptime(value)
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "none"
    return "-" if value is None else str(value)


_LABELS = {"session": "session", "backend": "backend", "state": "state", "sandbox_id": "sandbox id",
           "uptime_s": "uptime", "cells": "cells", "limits": "limits", "capabilities": "capabilities"}


def _rows(info: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, text) rows: the known keys first, in a fixed order, then the backend's others."""
    keys = [k for k in _LABELS if k in info] + [k for k in info if k not in _LABELS]
    return [(_LABELS.get(k, k.replace("_", " ")), _value(k, info[k])) for k in keys]


class StatusView:
    """Text and HTML of one or more sessions' :func:`status_info`."""

    def __init__(self, infos: list[dict[str, Any]]) -> None:
        self.infos = infos

    def text(self) -> str:
        blocks = []
        for info in self.infos:
            rows = _rows(info)
            width = max(len(label) for label, _ in rows)
            blocks.append("\n".join(f"{label:<{width}}  {value}" for label, value in rows))
        return "\n\n".join(blocks)

    def _repr_html_(self) -> str:
        tables = []
        for info in self.infos:
            body = "".join(f"<tr><th style='text-align:left'>{html.escape(label)}</th><td style='text-align:left'>"
                           f"{html.escape(value)}</td></tr>" for label, value in _rows(info))
            tables.append(f"<table>{body}</table>")
        return "".join(tables)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text())


LIST_COLUMNS = ("session", "backend", "state", "uptime_s", "cells")


class ListView(StatusView):
    """``%sandbox list``: one line per session."""

    def _table(self) -> list[list[str]]:
        return [[_value(key, info.get(key)) for key in LIST_COLUMNS] for info in self.infos]

    def text(self) -> str:
        rows = [[_LABELS[key] for key in LIST_COLUMNS], *self._table()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(LIST_COLUMNS))]
        return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)

    def _repr_html_(self) -> str:
        head = "".join(f"<th style='text-align:left'>{_LABELS[key]}</th>" for key in LIST_COLUMNS)
        body = "".join("<tr>" + "".join(f"<td style='text-align:left'>{html.escape(c)}</td>" for c in row) + "</tr>"
                       for row in self._table())
        return f"<table><tr>{head}</tr>{body}</table>"

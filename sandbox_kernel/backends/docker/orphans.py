"""What the docker backend could not remove when a sandbox ended (the engine was gone): kept
and removed at the next start."""

from __future__ import annotations

import contextlib
import time
from typing import Any

from ...core.errors import Missing, Refused, SandboxError
from .boundary import engine_errors


class Orphans:
    """A session's containers and volumes still to remove, as ``(kind, id)`` pairs (kind:
    ``"container"`` or ``"volume"``). Its methods are blocking (docker-py)."""

    def __init__(self) -> None:
        self.pending: list[tuple[str, str]] = []

    def remove(self, client: Any, container_id: str | None, volume: str | None) -> None:
        """Remove a sandbox's container and volume (None: it has none); one the engine cannot
        remove now (it is gone) is kept for :meth:`retry`. Never raises for the engine."""
        for kind, ident in (("container", container_id), ("volume", volume)):
            if ident is None:
                continue
            try:
                with engine_errors(f"remove the sandbox's {kind}"):
                    _remove(client, kind, ident)
            except Missing:
                pass
            except SandboxError:  # the engine is gone: try again at the next start
                self.pending.append((kind, ident))

    def retry(self, client: Any) -> None:
        """Remove what :meth:`remove` could not; what still fails stays pending."""
        for kind, ident in list(self.pending):
            with contextlib.suppress(SandboxError), engine_errors(f"remove a leftover {kind}"):
                _remove(client, kind, ident)
                self.pending.remove((kind, ident))


REMOVAL_WAIT_S = 10.0
"""Seconds a container that outlived its removal is waited for (see :func:`_remove`)."""


def _remove(client: Any, kind: str, ident: str) -> None:
    """Remove a container or volume; raises the engine's errors as the SandboxError tree
    (:class:`Missing` once it is gone).

    Podman mishandles a container that is stopping by itself, which a kernel asked to end
    (``shutdown_request``) often is by then. Measured under load: the removal was ignored (the
    container stayed, exited), or refused with a 500 "container not running". So a container
    still there after its removal, or whose removal was refused, is removed again every 0.2 s
    until it is gone or :data:`REMOVAL_WAIT_S` passed; the last refusal is then raised. Docker
    removes at once: its inspect is a 404 at the first try."""
    if kind == "volume":
        with engine_errors("remove the sandbox's volume"):
            client.api.remove_volume(ident, force=True)
        return
    deadline = time.monotonic() + REMOVAL_WAIT_S
    while True:
        try:
            with engine_errors("remove the sandbox's container"):
                client.api.remove_container(ident, force=True)
                client.api.inspect_container(ident)  # raises NotFound (Missing) once it is gone
        except Missing:
            raise
        except Refused:
            if time.monotonic() > deadline:
                raise
        else:
            if time.monotonic() > deadline:
                return
        time.sleep(0.2)

"""What the docker backend could not remove when a sandbox ended (the engine was gone): kept
and removed at the next start."""

from __future__ import annotations

import contextlib
from typing import Any

from ...core.errors import Missing, SandboxError
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


def _remove(client: Any, kind: str, ident: str) -> None:
    remove = client.api.remove_container if kind == "container" else client.api.remove_volume
    remove(ident, force=True)

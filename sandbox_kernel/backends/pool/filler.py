"""Taking a pooled sandbox, and the detached filler that refills a pool
(``python -m sandbox_kernel.backends.pool.filler``, given its order as JSON on stdin)."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
from typing import Any, Protocol

from .registry import FILL_LOG, Registry, _private_dir, pool_root, release


class Poolable(Protocol):
    """What a backend gives its pool (``local`` and ``docker`` implement it)."""

    name: str
    pool_size: int
    pool_ttl: float
    log: Any

    async def _pool_key(self) -> str | None:
        """The key of the sandboxes this backend makes now, or None when its configuration
        is not pooled."""

    async def _pool_launch(self) -> tuple[str, dict[str, Any]]:
        """Start a sandbox that waits to be claimed (outliving this process); return its name
        and the JSON record a session needs to take it over."""

    async def _adopt(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """Take over a pooled sandbox as if :meth:`_launch` had started it: return its
        kernel's connection info, or None when it is gone (then it is discarded)."""

    async def _pool_discard(self, record: dict[str, Any]) -> None:
        """Remove a pooled sandbox (dead, or a claim gone wrong). Must not raise."""

    def _pool_options(self) -> dict[str, Any]:
        """The backend's option values, as JSON, to make the same sandboxes in the filler."""


async def take(backend: Poolable) -> dict[str, Any] | None:
    """A pooled sandbox's connection info for ``backend``, taken over (see the module
    docstring), or None: no pool, or none waiting (start one cold). Starts the refill."""
    if backend.pool_size <= 0:
        return None
    key = await backend._pool_key()
    if key is None:
        return None
    registry = Registry(backend.name, key)
    info = None
    try:
        while info is None and (record := registry.claim()) is not None:
            try:
                info = await backend._adopt(record)
            except Exception as exc:  # noqa: BLE001 - a pooled sandbox gone wrong: start one cold
                backend.log.info("could not take pooled sandbox %s: %s", record.get("name"), exc)
                info = None
            if info is None:
                await backend._pool_discard(record)
                release(backend.name, record["name"])
        return info
    finally:
        refill(backend, key)


def refill(backend: Poolable, key: str) -> None:
    """Start the detached filler for ``key`` unless the pool is full. Never raises."""
    if Registry(backend.name, key).count() >= backend.pool_size:
        return
    order = {"backend": backend.name, "key": key, "size": backend.pool_size, "options": backend._pool_options()}
    try:
        log = open(_private_dir(pool_root()) / FILL_LOG, "ab")
        with log:
            filler = subprocess.Popen([sys.executable, "-m", "sandbox_kernel.backends.pool.filler"], stdin=subprocess.PIPE,
                                      stdout=log, stderr=log, start_new_session=True, close_fds=True)
        filler.stdin.write(json.dumps(order).encode())
        filler.stdin.close()
    except OSError as exc:
        backend.log.warning("could not start the pool's filler: %s", exc)


async def fill(order: dict[str, Any]) -> int:
    """The filler: start sandboxes for ``order["key"]`` until it has ``order["size"]``.
    Returns how many it started."""
    from .. import get_backend_class

    lock = open(_private_dir(pool_root()) / f"{order['backend']}-{order['key']}.lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # another filler has this key
        return 0
    backend = get_backend_class(order["backend"])(**order["options"])
    if (key := await backend._pool_key()) != order["key"]:
        print(f"pool filler: the options give key {key}, not {order['key']}: nothing started", file=sys.stderr)
        return 0
    registry, started = Registry(order["backend"], key), 0
    while registry.count() < order["size"]:
        name, record = await backend._pool_launch()
        registry.offer(name, record)
        started += 1
    return started


def main() -> int:  # pragma: no cover - runs detached (tests start it through a backend)
    with contextlib.suppress(OSError):
        os.nice(10)
    order = json.loads(sys.stdin.read())
    try:
        asyncio.run(fill(order))
    except Exception as exc:  # noqa: BLE001 - a detached process: its log says why
        print(f"{time.strftime('%F %T')} pool filler ({order.get('backend')}): {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

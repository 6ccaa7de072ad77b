"""One asyncio event loop in a daemon thread, for callers that cannot await.

An IPython kernel already runs an event loop on its main thread, and a plain script has none,
so the ``%%sandbox`` magic (:mod:`sandbox_kernel.frontdoors.magics.session`) and the synchronous
:class:`~sandbox_kernel.frontdoors.api.Sandbox` run every backend coroutine on such a loop and wait for
its concurrent future (:func:`asyncio.run_coroutine_threadsafe`).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import concurrent.futures.thread  # registers its exit hook before ours: ours then runs first
import threading
from collections.abc import Coroutine
from typing import Any


class LoopThread:
    """An asyncio event loop running forever in a daemon thread named ``name``."""

    def __init__(self, name: str = "sandbox-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        """Schedule ``coro`` on the loop (from any thread); returns its concurrent future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def in_loop(self) -> bool:
        """True when called from the loop's own thread (where waiting would deadlock)."""
        return threading.current_thread() is self._thread


_shared: LoopThread | None = None
_lock = threading.Lock()


def shared_loop() -> LoopThread:
    """The process-wide loop thread of the synchronous API, started on first use."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = LoopThread("sandbox-api-loop")
        return _shared


def at_exit(func) -> None:
    """Call ``func`` when the interpreter exits, while thread pools still work.

    Backends shut down through thread pools (``run_in_executor``: a process's wait, docker-py
    calls), which refuse work once :mod:`atexit` handlers run. ``threading._register_atexit``
    (what :mod:`concurrent.futures` itself uses) runs hooks earlier, in reverse order of
    registration; plain :mod:`atexit` is the fallback.
    """
    register = getattr(threading, "_register_atexit", None)
    try:
        register(func)
    except (TypeError, RuntimeError):
        atexit.register(func)

"""Start-up progress of a gateway kernel, shown in the cell that caused the start."""

from __future__ import annotations

import asyncio
import time

from ...core.events import Display, Emit


class StartProgress:
    """While the gateway starts the kernel (``POST /api/kernels`` can take a minute on
    Kubernetes), one display in the cell that updates in place every second, after the first 2 s."""

    def __init__(self, emit: Emit | None, where: str, kernel_name: str) -> None:
        self.emit, self.ok = emit, False
        self.what = f"a {kernel_name} kernel" if kernel_name else "a kernel"
        self.where, self.display_id = where, f"sandbox-kernel-gateway-start-{id(self):x}"
        self.started, self.shown, self.task = time.monotonic(), False, None

    def _show(self, text: str) -> None:
        self.emit(Display({"text/plain": text}, display_id=self.display_id, update=self.shown))
        self.shown = True

    async def _tick(self) -> None:
        await asyncio.sleep(2)
        while True:
            self._show(f"Starting {self.what} on the gateway at {self.where} "
                       f"[{time.monotonic() - self.started:.0f} s]")
            await asyncio.sleep(1)

    def __enter__(self) -> StartProgress:
        if self.emit is not None:
            self.task = asyncio.ensure_future(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        if self.task is not None:
            self.task.cancel()
        if self.shown:
            verb = "Started" if self.ok else "Could not start"
            self._show(f"{verb} {self.what} on the gateway at {self.where} in {time.monotonic() - self.started:.0f} s.")

"""What a docker backend learns of its engine, once, and of the image its sessions run, at each
start: docker-py's client, whether the engine is Podman's API, whether it shares this machine's
files or runs rootless, the transport chosen for it, and the image (with the kernelspec of
``kernel_name``) prepared for the next start. Given the backend's options, never its state.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ...core.events import Emit
from .engine import choose_transport, connect, engine_info, engine_is_here
from .image import BuildProgress, seeds_completer
from .images.for_kernel import build_command
from .podman import is_podman, refuse_ignored
from .prepare import prepare_image
from .rootless import is_rootless
from .watch import run_blocking


@dataclass
class EngineLink:
    """The engine of one backend and what it learnt of it (see the module docstring).

    Attributes:
        client: docker-py's client (None until :meth:`connect`).
        podman: the engine is Podman's Docker-compatible API.
        here: the engine shares this machine's filesystem (host paths mean the same there).
        rootless: the engine runs as a user (:mod:`.rootless`): ipc cannot work there.
        transport: what ``transport="auto"`` chose (``ipc`` or ``api``); empty until chosen.
        run_image: the image the sessions run: ``image``, or one built from ``dockerfile`` and
            ``packages``; empty until prepared.
        kernelspec: ``kernel_name``'s kernel.json in that image (None: ipykernel).
        prepared: the image was just prepared (by a first cell, which showed its build) and the
            next start need not look again.
        completer_cached: that image holds jedi's cache of what IPython's first completion parses
            (:func:`.image.seeds_completer`): the kernel front door then leaves out its warm-up.
    """

    client: Any = None
    podman: bool = False
    here: bool = True
    rootless: bool = False
    transport: str = ""
    run_image: str = ""
    kernelspec: dict[str, Any] | None = None
    prepared: bool = False
    completer_cached: bool = False

    @property
    def relayed(self) -> bool:
        """The kernel's channels go through the engine's attach stream (``transport="api"``)."""
        return self.transport == "api"

    async def connect(self, options: Any) -> Any:
        """docker-py's client (connected on first use), after refusing ``options`` Podman would
        ignore (before any build or container).

        Raises:
            BackendUnavailable: no engine. ConfigError: an option Podman ignores.
        """
        if self.client is None:
            client = await run_blocking(connect)
            self.podman = await run_blocking(is_podman, client)
            self.client = client
        if self.podman:
            refuse_ignored(options)
        return self.client

    async def choose_transport(self, asked: str) -> str:
        """What ``transport`` (``asked``: auto, ipc, api) means for this engine, looked up once."""
        if not self.transport:
            info = await run_blocking(engine_info, self.client)
            self.here, self.rootless = engine_is_here(self.client, info), is_rootless(info)
            self.transport = choose_transport(self.client, asked, self.here and not self.rootless)
        return self.transport

    def image_label(self, options: Any) -> str:
        """The image the session runs, as messages name it."""
        return (self.run_image or options.image) + (f" built from {options.dockerfile}" if options.dockerfile else "")

    async def ensure_image(self, options: Any, emit: Emit | None) -> None:
        """Check the image (an inspect), building it first if needed, with its progress shown by
        ``emit`` (a cell's), else logged. Raises what :func:`.prepare.prepare_image` raises."""
        client = await self.connect(options)
        progress = BuildProgress(emit, options.image, asyncio.get_running_loop()) if emit is not None else None
        if progress is not None:
            progress.command = build_command(options)
        log = progress or (lambda line: options.log.info("image build: %s", line))
        ok = False
        try:
            self.run_image, self.kernelspec = await run_blocking(prepare_image, client, options, log)
            self.completer_cached = await run_blocking(seeds_completer, client, self.run_image)
            self.prepared = ok = True
        finally:
            if progress is not None:
                progress.done(ok)

    async def prepare(self, options: Any, progress: Emit | None) -> Any:
        """The engine, with the image checked (built if needed: its progress to ``progress``, the
        door's) and the transport chosen; the next start looks at the image again (a changed
        Dockerfile is rebuilt)."""
        client = await self.connect(options)
        if not self.prepared:
            await self.ensure_image(options, progress)
        self.prepared = False
        await self.choose_transport(options.transport)
        return client

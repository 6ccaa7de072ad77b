"""What a session does about files around each cell, for every door: the workspace's one line,
the artifacts a cell wrote (listed after it, copied on request), and the hint for a file the
sandbox does not see but the host's folder has.

:meth:`SessionFiles.run_cell` wraps one execution: the sandbox started (its set-up shown in the
cell), the workspace's line said once per sandbox, the artifact hook installed once per sandbox
(:mod:`.inside`, run silently), the cell's events watched (the hook's report taken out, the hint
added to an error), and the listing shown at its end.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.errors import NotSupported, SandboxError
from ...core.events import Display, Emit, Error, Event, Outcome, Stream
from . import hints
from .artifacts import DOWNLOAD_COMMAND, MAX_BYTES, MAX_FILES, Ledger, Report, parse, render, safe_path
from .copyback import Copied, download_all
from .inside import MIME, install

BackendHint = Callable[[str, str], str]
"""``hint(option, value)``: how the user sets a backend option at one door, e.g.
``--DockerBackend.workspace=ro`` (a kernelspec) or ``workspace="ro"`` (the API)."""


def kernel_backend_hint(backend: Any) -> BackendHint:
    """The kernel's way: the option on the kernelspec's argv."""
    return lambda option, value: (f"--{type(backend).__name__}.{option}={value} on the kernelspec "
                                  f"(sandbox-kernel install --backend {backend.name} -- "
                                  f"--{type(backend).__name__}.{option}={value})")


@dataclass(frozen=True)
class FileOptions:
    """A door's choices: ``artifacts`` (notice what cells write), ``listing`` (show the list in
    the cell; the API only collects it), ``hint`` (how an option is named at the door)."""

    artifacts: bool = True
    listing: bool = True
    hint: BackendHint | None = None


class SessionFiles:
    """The files side of one session (see the module docstring)."""

    def __init__(self, backend: Any, options: FileOptions = FileOptions()) -> None:
        self.backend, self.options = backend, options
        self.hint = options.hint or kernel_backend_hint(backend)
        self.ledger = Ledger()
        self.last: Report | None = None  # the last cell's report (the API's ExecutionResult.artifacts)
        self._hooked = self._said_view = False  # in the current sandbox
        self._report: Report | None = None
        self._uploads: dict[str, int] = {}  # what the host put in (path: size): not the cells' writing

    @property
    def view(self) -> Any:
        """The backend's :class:`~sandbox_kernel.backends.workspace.View` while started, or None."""
        return getattr(self.backend, "workspace_view", None)

    @property
    def folder(self) -> Path:
        """The host's folder: the workspace's (by default the folder the door started in)."""
        return Path(os.path.realpath(os.path.expanduser(getattr(self.backend, "workspace_dir", "") or os.getcwd())))

    def replaced(self) -> None:
        """The sandbox was replaced by a fresh one: its files are gone; hook and line again."""
        self._hooked = self._said_view = False
        self.ledger.forget()
        self._uploads.clear()

    def uploaded(self, remote: str, size: int) -> None:
        """The host copied a file of ``size`` bytes to ``remote``: not an artifact unless a cell
        changes it."""
        if (path := safe_path(os.path.normpath(remote).replace(os.sep, "/"))) is not None:
            self._uploads[path] = size

    # -- around a cell -------------------------------------------------------------------------
    async def run_cell(self, emit: Emit, execute: Callable[[Emit], Awaitable[Outcome]],
                       start: Callable[[], Awaitable[None]]) -> Outcome:
        """``await execute(watched_emit)`` with the set-up before and the listing after."""
        self._report = self.last = None
        if self.options.artifacts or getattr(self.backend, "workspace", "off") != "off":
            await start()
            await self._prepare(emit)
        outcome = await execute(self._watch(emit))
        self._finish(emit)
        if outcome.error is not None and (line := self._hint_line(outcome.error)) is not None:  # the reply's too
            outcome = dataclasses.replace(outcome, error=dataclasses.replace(
                outcome.error, traceback=[*outcome.error.traceback, line]))
        return outcome

    async def _prepare(self, emit: Emit) -> None:
        if not self._said_view and (view := self.view) is not None:
            self._said_view = True
            emit(Stream("stderr", view.note()))
        if self.options.artifacts and not self._hooked and self._python():
            try:
                await self.backend.run_silently(install())
            except (NotSupported, SandboxError) as exc:  # no listing then; the cell still runs
                self.backend.log.info("artifacts are not listed: %s", exc)
            self._hooked = True

    def _python(self) -> bool:
        info = (getattr(self.backend, "kernel_info", None) or {}).get("language_info") or {}
        return info.get("name", getattr(self.backend, "language", "python")) == "python"

    def _watch(self, emit: Emit) -> Emit:
        def watched(event: Event) -> None:
            if isinstance(event, Display) and isinstance(event.data, dict) and MIME in event.data:
                self._report = parse(event.data[MIME]) or self._report
                return
            if isinstance(event, Error) and (line := self._hint_line(event)) is not None:
                event = dataclasses.replace(event, traceback=[*event.traceback, line])
            emit(event)
        return watched

    def _finish(self, emit: Emit) -> None:
        report, self._report = self._report, None
        if report is not None and self._uploads:  # seen once as they came in: later changes are the cells'
            seen = {a.path for a in report.files if self._uploads.get(a.path) == a.size}
            report = report.without(seen)
            for path in seen:
                del self._uploads[path]
        if report is None or not report.count:
            return
        self.ledger.add(report)
        self.last = report
        view = self.view
        if self.options.listing:
            emit(Display(render(report, DOWNLOAD_COMMAND, bound=bool(view and view.mode == "rw" and view.how == "bound")),
                         {}))

    def _hint_line(self, error: Error) -> str | None:
        """One more traceback line when an error names a file the host's folder has."""
        workdir = str(getattr(self.backend, "workdir", "") or "")
        path = hints.on_host(str(self.folder), error.ename, error.evalue, workdir)
        if path is None:
            return None
        view = self.view
        if error.ename in hints.WRITES:
            if view is None or view.mode != "ro" or view.reason(path):
                return None
            return (f"{path} is in the read-only workspace ({self.folder}): its files cannot be changed from the "
                    f"sandbox. Write a new file beside them (it stays in the sandbox, an artifact), or let the "
                    f"sandbox write the folder: {self.hint('workspace', 'rw')}")
        if view is None:
            return (f"{path} is in {self.folder} on this computer, but the sandbox does not see that folder. Let it "
                    f"see the folder: {self.hint('workspace', 'ro')}; or copy the file in: %sandbox upload {path}")
        if why := view.reason(path):
            return f"{path} is in {self.folder}, but the workspace leaves it out ({why})."
        if view.how == "copied":
            return (f"{path} is in {self.folder}, but not in the sandbox's copy of it, made when the sandbox "
                    f"started: %sandbox upload {path}, or restart the sandbox.")
        return None

    # -- copying back --------------------------------------------------------------------------
    async def download_one(self, remote: str, local: Path, *, overwrite: bool = False) -> Path:
        """A sandbox file to ``local``, at most :data:`~.artifacts.MAX_BYTES` (``%sandbox
        download REMOTE``, in the kernel and the magic).

        Raises:
            SandboxError: ``local`` exists and not ``overwrite``. FileNotFoundError,
                FileTooLarge, NotSupported: as :meth:`Backend.download`.
        """
        refuse_overwrite(local, overwrite)
        self.backend.require("files", "file download")
        return await self.backend.download(remote, local, max_bytes=MAX_BYTES)

    async def download_all(self, folder: Path, *, overwrite: bool = False) -> Copied:
        """Every artifact into ``folder`` (see :func:`.copyback.download_all`)."""
        self.backend.require("files", "file download")

        async def one(remote: str, local: Path, left: int) -> Path:
            return await self.backend.download(remote, local, max_bytes=left)
        return await download_all(self.ledger, folder, one, overwrite=overwrite, max_files=MAX_FILES,
                                  max_bytes=MAX_BYTES)

    def summary(self) -> str:
        """The artifacts so far, as text."""
        files = list(self.ledger.files.values())
        if not files:
            return "No artifacts yet: no cell has written a file in the working directory."
        report = Report(tuple(files[-MAX_FILES:]), len(files) + self.ledger.untracked, sum(f.size for f in files),
                        False)
        return render(report)["text/plain"].rstrip("\n")


def refuse_overwrite(local: Path, overwrite: bool) -> None:
    """Raises SandboxError when ``local`` exists and not ``overwrite`` (a download never
    replaces a file of the user's unasked)."""
    if local.exists() and not overwrite:
        raise SandboxError(f"{local} exists: add --overwrite to replace it.")


__all__ = ["BackendHint", "Copied", "FileOptions", "SessionFiles", "kernel_backend_hint", "refuse_overwrite"]

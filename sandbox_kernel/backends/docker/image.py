"""The docker backend's image: present, current with the packaged recipe, or built on first use
with progress shown in the cell.

Only images of the ``sandbox-kernel`` repository (``sandbox-kernel:latest``, ``sandbox-kernel:TAG``)
are built automatically, from the recipe in :mod:`sandbox_kernel.backends.docker.images`; an image built from an
older recipe (its ``org.sandbox-kernel.recipe`` label differs) is rebuilt. Any other image must
be present locally: the backend never pulls. The egress proxy's image (``sandbox-kernel-egress``,
:data:`EGRESS`) is another :class:`Kind` of image, built the same way from its own recipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.errors import BackendUnavailable, Missing, SandboxStartError
from ...core.events import Display, Emit
from .boundary import engine_errors

REPOSITORY = "sandbox-kernel"
BASES = ("python:3.11-slim-bookworm", "sandbox-kernel-base:bookworm")
"""Bases tried in turn for an automatic build when none is configured: the first present
locally wins; if none is, the engine is asked to pull the first."""
_build_lock = threading.Lock()


def _recipe(name: str) -> Any:
    from . import images

    return getattr(images, name)


@dataclass(frozen=True)
class Kind:
    """A kind of image the backend builds by itself: the repository its images are named in, the
    bases tried in turn, the recipe (:class:`.images.build.Recipe`), and how messages name it."""

    repository: str
    bases: tuple[str, ...]
    recipe: str
    """The name of the recipe in :mod:`.images` (imported lazily)."""
    what: str
    option: str
    """The option naming the image (``--DockerBackend.image``)."""
    build_flag: str = ""
    """What ``sandbox-kernel image build`` needs to build this kind (``--egress``)."""
    note: str = field(default="first use; about a minute")

    def is_ours(self, image: str) -> bool:
        """True for ``REPOSITORY[:TAG]``, which are built from the packaged recipe."""
        name = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
        return name == self.repository


SANDBOX = Kind(REPOSITORY, BASES, "SANDBOX", "sandbox image", "--DockerBackend.image")
EGRESS = Kind("sandbox-kernel-egress", ("python:3.13-slim-trixie", "sandbox-kernel-base:trixie"), "EGRESS",
              "egress proxy's image", "--DockerBackend.egress_image", build_flag=" --egress", note="first use with allow_hosts; about 30 s")
""":mod:`.egress`'s proxy: mitmproxy, which needs Python 3.12 or later (Debian trixie's 3.13)."""


def default_wheelhouse() -> Path:
    """Where automatic builds keep the image's wheels: ``$XDG_CACHE_HOME/sandbox-kernel/wheelhouse``."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "sandbox-kernel" / "wheelhouse"


def is_ours(image: str) -> bool:
    """True for images named ``sandbox-kernel[:TAG]``, which are built from the packaged recipe."""
    return SANDBOX.is_ours(image)


def _base(client: Any, image: str, configured: str, bases: tuple[str, ...] = BASES) -> str:
    """The configured base, else the one ``image`` was built from, else the first of ``bases``
    present locally."""
    from .images import BASE_LABEL

    if configured:
        return configured
    with contextlib.suppress(Missing), engine_errors(f"inspect the image {image}"):
        if previous := (client.api.inspect_image(image)["Config"].get("Labels") or {}).get(BASE_LABEL):
            return previous
    for name in bases:
        with engine_errors(f"inspect the image {name}"):
            if client.api.images(name=name, quiet=True):
                return name
    return bases[0]


def seeds_completer(client: Any, image: str) -> bool:
    """Whether ``image`` holds a prebuilt jedi cache for the launcher to link (its environment
    names :data:`~..kernel_client.launcher.SEED_VARIABLE`, as the default recipe's does). Blocking."""
    from ..kernel_client.launcher import SEED_VARIABLE

    with contextlib.suppress(Exception):
        env = client.api.inspect_image(image)["Config"].get("Env") or []
        return any(entry.startswith(f"{SEED_VARIABLE}=") and len(entry) > len(SEED_VARIABLE) + 1 for entry in env)
    return False


def ensure_image(client: Any, image: str, *, auto_build: bool, base: str = "", wheelhouse: str = "",
                 progress: Callable[[str], None] = lambda line: None, kind: Kind = SANDBOX) -> None:
    """Make sure ``image`` can be used; build or rebuild a ``sandbox-kernel`` image when it is
    missing or stale and ``auto_build`` is on. Blocking (a build takes about a minute). A missing
    image is built for the engine's architecture, a stale one for its own.

    Args:
        client: a docker-py client.
        image: the image name.
        auto_build: build ``sandbox-kernel`` images when missing or stale.
        base, wheelhouse: build inputs (empty: :data:`BASES`, :func:`default_wheelhouse`).
        progress: called with each build log line, from this thread.
        kind: which kind of image (:data:`SANDBOX`, :data:`EGRESS`).

    Raises:
        BackendUnavailable: a ``sandbox-kernel`` image is missing and ``auto_build`` is off.
        SandboxStartError: another image is missing, the engine's architecture is not one images
            are built for, or the build failed.
    """
    from ...core.errors import ImageBuildError
    from .images import build_image, engine_platform, image_is_current, image_platform

    recipe = _recipe(kind.recipe)
    with engine_errors(f"inspect the image {image}"):
        current = image_is_current(client, image, recipe=recipe)
    if current is None and not kind.is_ours(image):
        raise SandboxStartError(f"The image {image!r} is not present locally (the docker backend never pulls). "
                                f"Fix: `docker pull {image}` or build it, or leave {kind.option} unset.")
    if current or not kind.is_ours(image) or (current is False and not auto_build):
        return
    if not auto_build:
        raise BackendUnavailable(f"The {kind.what} {image!r} is missing.",
                                 fix=f"sandbox-kernel image build{kind.build_flag} --tag {image}")
    with _build_lock:
        with engine_errors(f"inspect the image {image}"):
            if image_is_current(client, image, recipe=recipe):  # built meanwhile by another session
                return
            try:
                platform = image_platform(client, image) if current is False else engine_platform(client)
            except ImageBuildError as exc:
                raise SandboxStartError(f"Could not build the {kind.what} {image!r}: {exc.message}.") from exc
            try:
                build_image(client, base=_base(client, image, base, kind.bases), tag=image, platform=platform,
                            wheelhouse=Path(wheelhouse) if wheelhouse else default_wheelhouse(), progress=progress,
                            recipe=recipe)
            except ImageBuildError as exc:
                if current is False:  # keep working with the older image
                    progress(f"warning: could not rebuild {image} from the current recipe; using the existing one. "
                             f"{exc.message}")
                    return
                raise SandboxStartError(
                    f"Could not build the {kind.what} {image!r}: {exc.message}. Fix: build it by hand with "
                    f"`sandbox-kernel image build{kind.build_flag} --tag {image} [--base IMAGE] [--wheelhouse DIR]` "
                    "(docs/explanation/docker-backend.md)."
                ) from exc


class BuildProgress:
    """Shows an image build in the running cell as one display that updates in place
    (``display_data`` then ``update_display_data`` with the same display_id): the current build
    step and the elapsed time. Call it with log lines from any thread; :meth:`done` at the end.
    ``what`` and ``note`` name the image being built ("the sandbox image X", "first use; about a
    minute"); set them before each build.
    """

    MIN_INTERVAL_S = 0.25

    def __init__(self, emit: Emit, image: str, loop: asyncio.AbstractEventLoop) -> None:
        self.emit, self.image, self.loop = emit, image, loop
        self.display_id = f"sandbox-kernel-image-build-{id(self):x}"
        self.started = self.shown = time.monotonic()
        self.step, self.shown_once = "", False
        self.what, self.note = f"the sandbox image {image}", "first use; about a minute"
        self.command = ""  # the command that builds it ahead of time, said while it builds

    def _show(self, text: str, on_loop: bool = False) -> None:
        event = Display({"text/plain": text}, display_id=self.display_id, update=self.shown_once)
        self.shown_once = True
        if on_loop:
            self.emit(event)
        else:
            self.loop.call_soon_threadsafe(self.emit, event)

    def __call__(self, line: str) -> None:
        if line.startswith("Step ") or line.startswith("warning:"):
            self.step = line
        elif not line.strip() or time.monotonic() - self.shown < self.MIN_INTERVAL_S:
            return
        self.shown = time.monotonic()
        detail = f"{self.step}\n  {line.strip()[:120]}" if line != self.step else self.step
        self._show(f"Building {self.what} ({self.note}) "
                   f"[{time.monotonic() - self.started:.0f} s]\n{detail}{self._ahead()}")

    def _ahead(self) -> str:
        """The line naming the command that builds the image ahead of time (what a scripted run
        that timed out at this cell needs to read)."""
        return f"\n(A scripted run, e.g. nbclient or papermill, should build it first: {self.command})" \
            if self.command else ""

    def done(self, ok: bool) -> None:
        """Show the outcome; called on the event loop's thread, after the build."""
        if self.shown_once:
            verb = "Built" if ok else "Could not build"
            self._show(f"{verb} {self.what} in {time.monotonic() - self.started:.0f} s.{self._ahead()}", on_loop=True)

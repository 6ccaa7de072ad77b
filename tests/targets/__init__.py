"""Test targets: one module per backend says whether it can run here and how to make it.

Each module defines ``TARGET``, a :class:`Target`. The contract suite, the kernel tests and the
magic tests are parametrized over ``NAMES``; a backend joins them by adding its module here.
The contract suite also runs on ``CONTRACT_NAMES``: a backend on another engine (the docker
backend on Podman's API) proves the contract there without repeating every kernel test.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

NAMES = ["local", "docker", "docker_api", "e2b", "gateway"]
"""Test targets. ``docker_api`` is the docker backend on its engine-API transport (the attach
stream), on the same local engine as ``docker`` (whose ``auto`` picks ipc here)."""
CONTRACT_NAMES = [*NAMES, "podman", "podman_api"]
"""Targets of the contract suite: also the docker backend on Podman's Docker-compatible API, with
``auto`` (which picks ipc there) and with ``transport=api``. (``podman_api`` once left exited
containers behind: the stream was closed before the removal, so the container was stopping by
itself when Podman was asked to remove it, which it ignored; the container now goes first.)"""

REMOTE_NAMES = ["docker_tcp", "docker_ssh"]
"""The docker backend on an engine that does not share this host's filesystem (the rig of
``remote_engine.py``), over TCP with TLS and over ssh: tests/test_docker_remote.py runs the
kernel's features on them."""


@dataclass
class Prepared:
    """A target ready for tests.

    Attributes:
        traits: keyword arguments for the backend class (``LocalBackend(**traits)``).
        kernel_env: environment variables for a kernel process started by a test.
        kernel_options: traitlets arguments appended to the kernelspec's argv.
        rig: the server or engine the target started, for tests that stop or inspect it (the
            ``e2b_server``, ``kernel_gateway`` and ``remote_engine`` fixtures), else None.
    """

    traits: dict[str, Any] = field(default_factory=dict)
    kernel_env: dict[str, str] = field(default_factory=dict)
    kernel_options: list[str] = field(default_factory=list)
    rig: Any = None


@dataclass
class Target:
    name: str
    backend: str = ""
    """The backend's registered name, when the target's name differs (a variant of a backend)."""
    unavailable: Callable[[], str | None] = lambda: None
    """None when the backend can run here, else the reason it cannot."""
    prepare: Callable[[], contextlib.AbstractContextManager[Prepared]] = lambda: contextlib.nullcontext(Prepared())
    """Session-wide set-up (e.g. a local E2B server); yields a :class:`Prepared`. The test plugin
    (tests/plugin/targets.py) enters it at the target's first use and leaves it at the session's end."""

    @property
    def backend_name(self) -> str:
        return self.backend or self.name

    @property
    def kernel_name(self) -> str:
        return f"sandbox-{self.backend_name}"


def backend_of(name: str) -> str:
    """The backend a target runs (``docker_api`` → ``docker``)."""
    return get(name).backend_name if name in CONTRACT_NAMES + REMOTE_NAMES else name


def get(name: str) -> Target:
    try:
        return importlib.import_module(f"tests.targets.{name}").TARGET
    except ModuleNotFoundError:
        return Target(name, unavailable=lambda: "no test target for it in tests/targets")


def skip_or_fail(reason: str) -> None:
    """Skip with ``reason``; with SANDBOX_KERNEL_NO_SKIP=1 (set by CI) fail instead, so a
    backend that should have been tested cannot pass silently."""
    if os.environ.get("SANDBOX_KERNEL_NO_SKIP"):
        pytest.fail(f"required backend test could not run: {reason}", pytrace=False)
    pytest.skip(reason)


@contextlib.contextmanager
def env_vars(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the duration of the block."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

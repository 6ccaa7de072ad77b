"""The test targets of a session (tests/targets/: one module per backend or rig) and the
fixtures that give them to tests.

A target is prepared once per session (per xdist worker), the first time a test asks for it,
and undone when the session ends (the ``targets`` fixture's teardown): the local E2B server, the
Kernel Gateway, the Podman service, the remote engine. A target that cannot run here skips its
tests, or fails them where ``SANDBOX_KERNEL_NO_SKIP`` is set (CI).

Fixtures: ``targets`` (the :class:`Targets` of the session), the rigs ``e2b_server``,
``kernel_gateway``, ``podman_service``, ``remote_engine``, a docker-py ``docker_client`` of the
local engine, ``backend_name`` / ``make_backend`` (each backend of ``NAMES`` in turn, and
unstarted backends of it) and ``sandbox`` (a started backend a module's read-only cases share).
Plain helpers (:func:`tests.support.backends.prepared`, :func:`tests.kernels.kernel`, ...) reach
the same targets through :func:`session_targets`.
"""

from __future__ import annotations

import atexit
import contextlib
from typing import Any

import pytest
import pytest_asyncio

from tests import targets as catalogue
from tests.targets import NAMES, Prepared, skip_or_fail


class Targets:
    """The targets prepared in this session, by name; each prepared at its first use."""

    def __init__(self) -> None:
        self._prepared: dict[str, Prepared] = {}
        self._stack = contextlib.ExitStack()

    def prepared(self, name: str) -> Prepared:
        """The set-up of target ``name`` (skips, or fails in CI, when it cannot run here), asked
        at its first use only: a target that was there stays there for the session (a loaded
        engine slow to answer one of hundreds of pings is no reason to fail a test)."""
        if name not in self._prepared:
            target = catalogue.get(name)
            if (reason := target.unavailable()) is not None:
                skip_or_fail(f"{name} backend unavailable: {reason}")
            self._prepared[name] = self._stack.enter_context(target.prepare())
        return self._prepared[name]

    def close(self) -> None:
        """Undo every set-up, the last made first."""
        self._prepared.clear()
        self._stack.close()


_SESSION: Targets | None = None
"""The session's targets, for the plain helpers (created when pytest configures the plugin,
closed by the ``targets`` fixture's teardown or, if no test used it, when pytest unconfigures)."""


def session_targets() -> Targets:
    """The :class:`Targets` of the running test session; outside one (a benchmark under
    benchmarks/ using the tests' set-up), the process's own, undone when it exits."""
    global _SESSION
    if _SESSION is None:
        _SESSION = Targets()
        atexit.register(_SESSION.close)
    return _SESSION


def pytest_configure(config: pytest.Config) -> None:
    global _SESSION
    _SESSION = Targets()


def pytest_unconfigure(config: pytest.Config) -> None:
    global _SESSION
    if _SESSION is not None:
        _SESSION.close()
        _SESSION = None


@pytest.fixture(scope="session", autouse=True)
def targets() -> Any:
    """The session's :class:`Targets`; every target prepared is undone at the session's end."""
    session = session_targets()
    yield session
    session.close()


@pytest.fixture(scope="session")
def e2b_server(targets):
    """The local E2B-compatible server (``tests/e2b_server.py``) of the ``e2b`` target."""
    return targets.prepared("e2b").rig


@pytest.fixture(scope="session")
def kernel_gateway(targets):
    """The Jupyter Kernel Gateway of the ``gateway`` target (tests stop it or delete its kernels)."""
    return targets.prepared("gateway").rig


@pytest.fixture(scope="session")
def remote_engine(targets):
    """The running rig of :mod:`tests.targets.remote_engine`: an engine that does not share this
    host's filesystem."""
    return targets.prepared("remote_engine").rig


@pytest.fixture(scope="session")
def docker_client(targets):
    """A docker-py client of the local engine (skips, or fails in CI, without the engine and image)."""
    import docker

    targets.prepared("docker")
    client = docker.from_env()
    yield client
    client.close()


@pytest.fixture(params=NAMES)
def backend_name(request, targets) -> str:
    """Each backend's name in turn; a test using it runs once per backend."""
    targets.prepared(request.param)
    return request.param


@pytest.fixture
async def make_backend(backend_name):
    """``make_backend(**traits)`` → an unstarted backend of the current kind
    (:func:`tests.support.backends.backends`); each is shut down after the test."""
    from tests.support.backends import backends

    async with backends(backend_name) as make:
        yield make


@pytest.fixture(scope="module")
def sandbox_traits() -> dict:
    """Traits of the module's shared ``sandbox`` beyond its target's (none; a module may override
    it, as tests/test_docker_runsc.py gives ``runtime``)."""
    return {}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox(backend_name, sandbox_traits):
    """A started backend of ``backend_name`` that a module's read-only cases share, as ipykernel's
    tests share ``kernel()``; cases that start, restart, interrupt, time out, kill or change what
    others would see make their own (``make_backend``). A module using it gives ``backend_name``
    at module scope and runs its tests on the module's event loop
    (``pytest.mark.asyncio(loop_scope="module")``), where the sandbox lives; shut down when the
    module's (or, parametrized, the backend's) last test is done."""
    from tests.support.backends import backends

    async with backends(backend_name) as make, make(**sandbox_traits) as backend:
        yield backend


@pytest.fixture
async def make_e2b(e2b_server, monkeypatch):
    """``make_e2b(env={...}, drop=(...), **traits)``: an E2BBackend made with the server's
    environment (plus ``env``, minus ``drop``); each is shut down after the test."""
    from sandbox_kernel.backends.e2b import E2BBackend

    made = []

    def make(env=None, drop=(), **traits):
        with monkeypatch.context() as patch:
            for key, value in {**e2b_server.env(), **(env or {})}.items():
                patch.setenv(key, value)
            for key in drop:
                patch.delenv(key, raising=False)
            backend = E2BBackend(**traits)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        await backend.shutdown()


@pytest.fixture(scope="session")
def own_image(docker_client, test_run):
    """``own_image(base)`` → ``sandbox-kernel-test:RUN-WORKER-N``: ``base`` with a label of this run
    and worker, a new image id (the same layers), so that the images a test derives from it
    (``packages``' tags are digests of their base's id) are its run's own: removing them at the
    end never takes another run's. Built once per base (about a second); removed at the end."""
    import io

    made: dict[str, str] = {}

    def own(base: str) -> str:
        if base not in made:
            tag = f"sandbox-kernel-test:{test_run}-{len(made)}"
            docker_client.images.build(fileobj=io.BytesIO(f"FROM {base}\nLABEL org.sandbox-kernel.test-run={test_run}\n".encode()),
                                       tag=tag, rm=True)
            made[base] = tag
        return made[base]

    yield own
    for tag in made.values():
        with contextlib.suppress(Exception):  # in use by a container being removed: left for the engine's prune
            docker_client.images.remove(tag)

"""Fixtures of the e2b backend's tests: the local E2B-compatible server of ``tests/e2b_server.py``
(one per test session, from the ``e2b`` test target) and backends made against it.

A test module uses them by importing them: ``from tests.support.e2b import make, srv``.
"""

from __future__ import annotations

import pytest

from sandbox_kernel.backends.e2b import E2BBackend
from sandbox_kernel.core.events import Display
from tests.support.backends import prepared
from tests.support.recorder import Recorder
from tests.targets import e2b as target


@pytest.fixture
def srv():
    prepared("e2b")
    return target.server()


@pytest.fixture
async def make(srv, monkeypatch):
    """``make(env={...}, drop=(...), **traits)``: an E2BBackend made with the server's environment
    (plus ``env``, minus ``drop``); shut down after the test."""
    made = []

    def make(env=None, drop=(), **traits):
        with monkeypatch.context() as patch:
            for key, value in {**srv.env(), **(env or {})}.items():
                patch.setenv(key, value)
            for key in drop:
                patch.delenv(key, raising=False)
            backend = E2BBackend(**traits)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        await backend.shutdown()


def result(rec: Recorder) -> str:
    return next(d.data["text/plain"] for d in rec.of(Display) if d.execution_count is not None)

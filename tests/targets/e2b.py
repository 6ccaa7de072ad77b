"""The e2b backend against the local E2B-compatible server (``tests/e2b_server.py``): the real
SDK over real HTTP on 127.0.0.1, no cloud and no mocks. One server for the whole test session
(per xdist worker); the ``e2b_server`` fixture (or :func:`server`) gives it to tests that kill or
inspect sandboxes."""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator

from . import Prepared, Target


def server():
    """The session's running :class:`tests.e2b_server.E2BTestServer` (the ``e2b_server`` fixture)."""
    from tests.support.backends import prepared

    return prepared("e2b").rig


def _unavailable() -> str | None:
    if importlib.util.find_spec("e2b_code_interpreter") is None:
        return "the E2B SDK is not installed (pip install 'sandbox-kernel[e2b]')"
    return None


@contextlib.contextmanager
def _prepare() -> Iterator[Prepared]:
    from tests.e2b_server import E2BTestServer

    with E2BTestServer() as srv:
        yield Prepared(kernel_env=srv.env(), rig=srv)


TARGET = Target("e2b", unavailable=_unavailable, prepare=_prepare)

"""Helpers of the e2b backend's tests. Their fixtures are the test plugin's (tests/plugin/targets.py):
``e2b_server`` (the local E2B-compatible server of ``tests/e2b_server.py``, one per test session)
and ``make_e2b`` (E2B backends made against it)."""

from __future__ import annotations

from sandbox_kernel.core.events import Display
from tests.support.recorder import Recorder


def result(rec: Recorder) -> str:
    return next(d.data["text/plain"] for d in rec.of(Display) if d.execution_count is not None)

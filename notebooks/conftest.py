"""nbval's notebook items live here, outside ``tests/``, so ``tests/conftest.py``'s per-item hook
(which gives a ``sandbox-NAME`` notebook's kernel the backend's test environment, e.g. the local
E2B server's address) must be made visible to them: conftest hooks apply to their own directory.

A notebook listed in :data:`CONFIG_DIRS` gets its kernel's options from that Jupyter config
directory (put first on ``JUPYTER_CONFIG_PATH`` while its first cell is set up, when nbval starts
the kernel; unlike ``JUPYTER_CONFIG_DIR``, nothing is written there)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import pytest_runtest_setup as backend_environment

CONFIG_DIRS = {"docker.ipynb": Path(__file__).parent / "config" / "docker"}
_saved: list[tuple[str | None]] = []


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    backend_environment(item)
    config = CONFIG_DIRS.get(Path(str(item.fspath)).name)
    if config is not None and not _saved:
        _saved.append((os.environ.get("JUPYTER_CONFIG_PATH"),))
        os.environ["JUPYTER_CONFIG_PATH"] = os.pathsep.join(filter(None, [str(config), _saved[0][0]]))


def pytest_runtest_teardown(item):
    if _saved:
        (value,) = _saved.pop()
        if value is None:
            os.environ.pop("JUPYTER_CONFIG_PATH", None)
        else:
            os.environ["JUPYTER_CONFIG_PATH"] = value

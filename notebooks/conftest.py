"""nbval's notebook items live here, outside ``tests/``: the test plugin (tests/plugin/) gives a
``sandbox-NAME`` notebook's kernel the backend's test environment (e.g. the local E2B server's
address) and each notebook its xdist group.

A notebook listed in :data:`CONFIG_DIRS` gets its kernel's options from that Jupyter config
directory (put first on ``JUPYTER_CONFIG_PATH`` while its first cell is set up, when nbval starts
the kernel; unlike ``JUPYTER_CONFIG_DIR``, nothing is written there)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.plugin.locks import WORKSPACE_VOLUMES

pytest_plugins = ["tests.plugin"]

CONFIG_DIRS = {"docker.ipynb": Path(__file__).parent / "config" / "docker"}
WORKSPACE = {"docker.ipynb"}
"""Notebooks whose sandbox's working directory is a workspace volume: they hold the machine lock
that keeps ``gc --volumes`` of any test run away while they run (tests/plugin/locks.py)."""


def pytest_collection_modifyitems(items):
    for item in items:
        if Path(str(item.fspath)).name in WORKSPACE and getattr(item.parent, "nb", None) is not None:
            item.add_marker(pytest.mark.machine_lock(WORKSPACE_VOLUMES))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    config = CONFIG_DIRS.get(Path(str(item.fspath)).name)
    if config is None:
        return (yield)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JUPYTER_CONFIG_PATH", os.pathsep.join(filter(None, [str(config), os.environ.get("JUPYTER_CONFIG_PATH")])))
        return (yield)

"""Fixtures of the ``%%sandbox`` magic's notebook scenario (tests/support/magic.py): the notebook
runs once per backend and session, and each test checks its cells."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def magic_scenarios(tmp_path_factory) -> dict:
    """``{backend_name: (cells, replies)}``, filled as backends are asked for."""
    return {}


def _scenario(backend_name: str, runs: dict, tmp_path_factory) -> tuple[dict, dict]:
    from tests.support.magic import scenario

    if backend_name not in runs:
        runs[backend_name] = scenario(backend_name, tmp_path_factory.mktemp("magic"))
    return runs[backend_name]


@pytest.fixture
def cells(backend_name, magic_scenarios, tmp_path_factory) -> dict:
    """The scenario's cells by key, after its run on ``backend_name``."""
    return _scenario(backend_name, magic_scenarios, tmp_path_factory)[0]


@pytest.fixture
def replies(backend_name, magic_scenarios, tmp_path_factory) -> dict:
    """The scenario's ``execute_reply`` contents by key, after its run on ``backend_name``."""
    return _scenario(backend_name, magic_scenarios, tmp_path_factory)[1]

"""The one rule for paths in a sandbox: they stay in its working directory."""

from __future__ import annotations

import pytest

from sandbox_kernel.runtime.paths import within

pytestmark = pytest.mark.unit

WORK = "/home/sandbox/work"


@pytest.mark.parametrize("path, expected", [
    ("data.csv", f"{WORK}/data.csv"),
    ("a/./b/../c.txt", f"{WORK}/a/c.txt"),
    (f"{WORK}/x", f"{WORK}/x"),
    (".", WORK),
    ("..", None),
    ("../work2/x", None),
    ("a/../../x", None),
    ("/etc/passwd", None),
    (f"{WORK}2/x", None),  # a sibling that shares the prefix
])
def test_within_the_working_directory(path, expected):
    assert within(WORK, path) == expected

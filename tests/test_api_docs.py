"""docs/how-to/agents.md's examples run as they stand, on the docker backend, each in a fresh interpreter;
what a ``print(...)  # EXPECTED`` comment promises appears in the output."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.backends import prepared

pytestmark = pytest.mark.docker  # every example runs on the docker backend

DOC = Path(__file__).resolve().parents[1] / "docs" / "how-to" / "agents.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def expectations(code: str) -> list[str]:
    """The text each ``print(...)  # EXPECTED  (remark)`` comment promises."""
    found = []
    for comment in re.findall(r"print\(.*\)\s+# (.+)$", code, re.M):
        expected = comment.split("  (")[0].removesuffix("...").strip()
        found.append(expected)
    return found


def test_the_doc_has_examples():
    assert len(BLOCKS) >= 5 and all(expectations(block) for block in BLOCKS)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_example_runs(index):
    prepared("docker")
    code = BLOCKS[index]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    for expected in expectations(code):
        assert expected in done.stdout, f"{expected!r} not in the output:\n{done.stdout}"

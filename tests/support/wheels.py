"""Wheels for the tests that install Python packages, downloaded before the tests by
``.ci/test-wheels-setup.sh`` into ``build/test-wheels``: while tests run, pip reads only those
folders (a test reaches no listener but its own), so a wheel missing there fails the test."""

from __future__ import annotations

from pathlib import Path

from tests.targets import skip_or_fail

FOLDER = Path(__file__).resolve().parents[2] / "build" / "test-wheels"


def offline_pip(*folders: str) -> dict[str, str]:
    """pip's environment variables that make it install or download from ``folders`` of
    :data:`FOLDER` only, never from an index: ``host`` (this machine's Python), ``x86_64`` or
    ``aarch64`` (the sandbox image's). Skips (fails in CI) when a folder is missing."""
    paths = [FOLDER / name for name in folders]
    for path in paths:
        if not path.is_dir():
            skip_or_fail(f"the test wheels {path} are missing; run `bash .ci/test-wheels-setup.sh`")
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": " ".join(str(path) for path in paths)}

"""How many examples the property tests (hypothesis) try: all of them in CI, a quarter on a
developer's machine, so ``pytest -m unit`` stays a quick loop (docs/contributing.md).

``.ci/run`` sets ``HYPOTHESIS_PROFILE=ci``; ``HYPOTHESIS_PROFILE=ci pytest ...`` does the same by hand.
"""

from __future__ import annotations

import os

FULL = os.environ.get("HYPOTHESIS_PROFILE") == "ci"


def examples(n: int) -> int:
    """``n`` under the ci profile, else a quarter of it (at least 10)."""
    return n if FULL else max(10, n // 4)

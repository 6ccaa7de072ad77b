"""``python -m sandbox_kernel.images``: the same as ``sandbox-kernel image``."""

import sys

from ..backends.docker.images.__main__ import main

if __name__ == "__main__":
    sys.exit(main())

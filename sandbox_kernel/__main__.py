"""``python -m sandbox_kernel -f CONNECTION_FILE [--SandboxKernel.backend=...]``: launch the
kernel (what kernelspecs run). ``python -m sandbox_kernel install|list|...`` runs the CLI."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())

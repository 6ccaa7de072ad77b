"""A plain ``python3`` host kernel with the ``%%sandbox`` magic loaded, configured with a
backend's test set-up (its traits as ``--Class.trait=value`` config, its environment)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from tests.kernels import run, start_new_kernel
from tests.support.backends import prepared
from tests.targets import backend_of


def host_arguments(backend_name: str) -> list[str]:
    """The backend's test traits as host-kernel config: ``--LocalBackend.x=y``."""
    from sandbox_kernel.backends import get_backend_class

    cls = get_backend_class(backend_of(backend_name)).__name__
    return [f"--{cls}.{key}={value}" for key, value in prepared(backend_name).traits.items()]


@contextlib.contextmanager
def host_kernel(backend_name: str, cwd: Path | None = None):
    """A plain ``python3`` kernel with the extension loaded; yields ``(km, kc)``."""
    km, kc = start_new_kernel(kernel_name="python3", env={**os.environ, **prepared(backend_name).kernel_env},
                              extra_arguments=host_arguments(backend_name), cwd=str(cwd) if cwd else None,
                              startup_timeout=60)
    try:
        assert run(kc, "%load_ext magics")[0]["status"] == "ok"
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)

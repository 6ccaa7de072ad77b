"""What makes a test run's machine state its own, and its xdist worker's own.

Set for the whole worker process when pytest configures it (undone when it unconfigures), so
every kernel, sandbox and pool filler a test starts inherits it:

- ``SANDBOX_KERNEL_POOL_ROOT``: the warm pools' registry under the worker's base temporary folder
  (pooled docker containers carry it as a label: a sweep or ``pool stop`` takes only its own);
- ``SANDBOX_KERNEL_HOSTDIR_ROOT``: the docker backend's ipc host directories (the leftovers'
  sweep of every sandbox's start, on any run, looks only in its own);
- ``JUPYTER_DATA_DIR`` and ``IPYTHONDIR``: the local sandboxes' IPython history
  (``sandbox-kernel/history/local.sqlite``), the host kernels' history and connection files:
  another run's cells never show in this run's ``history`` replies.

Named here for tests: :func:`run_id` (``RUNID-WORKER``, in image tags and resource names, so that
a test removes only what its own run made) and :func:`worker_id`.

Everything else a test makes carries its own name already: containers and volumes the owner
label ``HOST/PID/STARTTIME`` of the worker or kernel that made them, temporary folders pytest's
``tmp_path``, servers port 0. What a test must share with every run on the machine is behind a
machine lock (:mod:`.locks`).
"""

from __future__ import annotations

import os
import uuid

import pytest

_RUN = pytest.StashKey[str]()
_PATCH = pytest.StashKey[pytest.MonkeyPatch]()


def worker_id() -> str:
    """This xdist worker's name (``gw0``, ``gw1``, ...), or ``main`` without xdist."""
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def run_id(config: pytest.Config) -> str:
    """``RUNID-WORKER``: 8 hex digits of this test run (the same in all its workers) and the worker."""
    return config.stash[_RUN]


@pytest.hookimpl(trylast=True)  # after pytest's tmp_path plugin made its factory
def pytest_configure(config: pytest.Config) -> None:
    run = (os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex)[:8]
    config.stash[_RUN] = f"{run}-{worker_id()}"
    base = config._tmp_path_factory.getbasetemp()  # noqa: SLF001 - pytest's own base temp (per worker under xdist)
    patch = config.stash[_PATCH] = pytest.MonkeyPatch()
    for variable, folder in (("SANDBOX_KERNEL_POOL_ROOT", "pool"), ("SANDBOX_KERNEL_HOSTDIR_ROOT", "hostdirs"),
                             ("JUPYTER_DATA_DIR", "jupyter-data"), ("IPYTHONDIR", "ipython")):
        path = base / folder
        path.mkdir(mode=0o700, exist_ok=True)
        patch.setenv(variable, str(path))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _PATCH in config.stash:
        config.stash[_PATCH].undo()


@pytest.fixture(scope="session")
def test_run(pytestconfig) -> str:
    """:func:`run_id` of this run and worker: put it in what a test names on the machine."""
    return run_id(pytestconfig)

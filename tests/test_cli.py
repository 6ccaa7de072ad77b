"""The ``sandbox-kernel`` command: kernelspecs written with KernelSpecManager."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from jupyter_client.kernelspec import KernelSpecManager

pytestmark = pytest.mark.kernel


def cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "sandbox_kernel", *args], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=60)


def test_install_list_uninstall_with_a_prefix(tmp_path):
    done = cli("install", "--prefix", str(tmp_path), "--backend", "local", "--", "--LocalBackend.memory_limit=2g")
    assert done.returncode == 0, done.stderr
    spec_dir = tmp_path / "share" / "jupyter" / "kernels" / "sandbox-local"
    spec = json.loads((spec_dir / "kernel.json").read_text())
    assert spec["display_name"] == "Python 3 (sandbox: local)"
    assert spec["interrupt_mode"] == "message"
    assert spec["argv"][1:] == ["-m", "sandbox_kernel", "-f", "{connection_file}",
                                "--SandboxKernel.backend=local", "--LocalBackend.memory_limit=2g"]
    jupyter_path = str(tmp_path / "share" / "jupyter")
    assert "sandbox-local" in KernelSpecManager(kernel_dirs=[str(spec_dir.parent)]).find_kernel_specs()
    listed = cli("list", JUPYTER_PATH=jupyter_path)
    assert f"sandbox-local\t{spec_dir}" in listed.stdout
    removed = cli("uninstall", "--backend", "local", JUPYTER_PATH=jupyter_path)
    assert removed.returncode == 0 and not spec_dir.exists()


def test_jupyter_kernelspec_list_shows_the_installed_specs():
    listed = subprocess.run([sys.executable, "-m", "jupyter", "kernelspec", "list"], capture_output=True, text=True)
    assert "sandbox-local" in listed.stdout


def test_unknown_subcommand_is_a_usage_message():
    done = cli("frobnicate")
    assert done.returncode == 2 and "usage: sandbox-kernel" in done.stderr and "Traceback" not in done.stderr

"""The ``sandbox-kernel`` command: kernelspecs written with KernelSpecManager."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from jupyter_client.kernelspec import KernelSpecManager

from tests.targets import skip_or_fail

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


@pytest.fixture
def open_tmp():
    """A temporary folder under /tmp that other users may enter (pytest's tmp_path is in a 0700 folder)."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="sandbox-kernel-specs-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def test_kernelspecs_installed_under_umask_077_are_readable_by_another_user(open_tmp):
    """A hub's admin installs as root, often with umask 077; every user's server must list them."""
    import os
    import shutil

    if os.getuid() != 0 or shutil.which("runuser") is None:
        skip_or_fail("reading as another user needs root and runuser (CI runs as root)")
    prefix = open_tmp / "env"
    done = subprocess.run(["sh", "-c", f'umask 077 && exec "$0" -m sandbox_kernel install --prefix {prefix} '
                                       "--backend local --backend docker", sys.executable],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    kernels = prefix / "share" / "jupyter" / "kernels"
    made = [prefix, *prefix.rglob("*")]
    assert {oct(p.stat().st_mode & 0o777) for p in made if p.is_dir()} == {"0o755"}
    assert {oct(p.stat().st_mode & 0o777) for p in made if p.is_file()} == {"0o644"}
    for name in ("sandbox-local", "sandbox-docker"):
        read = subprocess.run(["runuser", "-u", "nobody", "--", "cat", str(kernels / name / "kernel.json")],
                              capture_output=True, text=True, timeout=30)
        assert read.returncode == 0, read.stderr
        assert json.loads(read.stdout)["argv"][-1] == f"--SandboxKernel.backend={name.removeprefix('sandbox-')}"


def test_install_writes_only_the_kernelspecs_whose_backends_are_installed(tmp_path):
    """In an environment without the e2b SDK (this venv's site-packages seen without its
    distribution), ``install`` skips sandbox-e2b and says how to get it; named, it is written."""
    import site

    view = tmp_path / "site"
    view.mkdir()
    for entry in Path(site.getsitepackages()[0]).iterdir():
        if not entry.name.lower().startswith(("e2b_code_interpreter", "e2b-code-interpreter")):
            (view / entry.name).symlink_to(entry)
    env = {"PYTHONPATH": str(view), "JUPYTER_PATH": ""}
    argv = [sys.executable, "-S", "-m", "sandbox_kernel", "install", "--prefix", str(tmp_path / "p")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert ("skipped sandbox-e2b: its backend needs e2b-code-interpreter (pip install 'sandbox-kernel[e2b]', "
            "then install again)") in done.stdout
    kernels = tmp_path / "p" / "share" / "jupyter" / "kernels"
    assert sorted(p.name for p in kernels.iterdir()) == ["sandbox-docker", "sandbox-gateway", "sandbox-local"]
    named = subprocess.run([*argv, "--backend", "e2b"], capture_output=True, text=True, timeout=60, env=env)
    assert named.returncode == 0 and "note: its backend needs e2b-code-interpreter" in named.stdout
    assert (kernels / "sandbox-e2b" / "kernel.json").exists()

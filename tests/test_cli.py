"""The ``sandbox-kernel`` command: kernelspecs written with KernelSpecManager."""

from __future__ import annotations

import contextlib
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


def test_each_kernelspec_carries_the_logos_frontends_show(tmp_path):
    """JupyterLab's Launcher shows a kernelspec's ``logo-svg.svg`` (else ``logo-64x64.png``), Notebook 7
    and VS Code its PNGs; without them the Launcher drew a letter on a grey square."""
    import xml.etree.ElementTree as ET

    from jupyter_server.services.kernelspecs.handlers import kernelspec_model
    from PIL import Image

    done = cli("install", "--prefix", str(tmp_path), "--backend", "local", "--backend", "docker")
    assert done.returncode == 0, done.stderr
    kernels = tmp_path / "share" / "jupyter" / "kernels"
    manager = KernelSpecManager(kernel_dirs=[str(kernels)])
    for name in ("sandbox-local", "sandbox-docker"):
        model = kernelspec_model(type("Handler", (), {"base_url": "/"})(), name, manager.get_kernel_spec(name).to_dict(),
                                 str(kernels / name))
        assert set(model["resources"]) >= {"logo-svg", "logo-64x64", "logo-32x32"}
        for size in (32, 64):
            with Image.open(kernels / name / f"logo-{size}x{size}.png") as png:
                assert png.format == "PNG" and png.size == (size, size)
        svg = ET.parse(kernels / name / "logo-svg.svg").getroot()
        assert svg.tag == "{http://www.w3.org/2000/svg}svg" and svg.get("viewBox") == "0 0 64 64"
        assert not any(child.tag.endswith(("script", "foreignObject", "image")) for child in svg.iter())


@contextlib.contextmanager
def jupyter_server(tmp_path: Path, env: dict[str, str]):
    """A Jupyter Server on 127.0.0.1 (port 0, a token) with ``env``'s Jupyter directories; yields
    ``GET /api/kernelspecs``'s answer as a function."""
    import os
    import secrets
    import time
    import urllib.request

    token, runtime = secrets.token_hex(8), Path(env["JUPYTER_RUNTIME_DIR"])
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    process = subprocess.Popen([sys.executable, "-m", "jupyter_server", "--no-browser", "--ip=127.0.0.1", "--port=0",
                                f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--allow-root"],
                               env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (infos := list(runtime.glob("jpserver-*.json"))) and time.monotonic() < deadline:
            assert process.poll() is None, "jupyter server exited"
            time.sleep(0.1)
        time.sleep(0.2)  # the file is written whole before the server answers; let it finish writing
        url = json.loads(infos[0].read_text())["url"].rstrip("/")

        def kernelspecs() -> dict:
            request = urllib.request.Request(f"{url}/api/kernelspecs", headers={"Authorization": f"token {token}"})
            with urllib.request.urlopen(request, timeout=10) as answer:
                return json.loads(answer.read())
        yield kernelspecs
    finally:
        process.terminate()
        process.wait(30)
        for info in runtime.glob("jpserver-*"):
            info.unlink()


def test_install_default_makes_a_sandbox_kernel_the_servers_default_and_only_kernel(tmp_path):
    """``--default NAME``: the server's default kernel (the Launcher's first card, new notebooks'
    kernel) is sandbox-NAME instead of python3 (jupyter_server's own default); ``--only``: no other
    kernel is offered; the settings come out again when the kernel is uninstalled."""
    from sandbox_kernel.frontdoors.kernel import server_config

    env = {"JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_DATA_DIR": str(tmp_path / "data"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    done = cli("install", "--user", "--backend", "local", "--default", "local", **env)
    assert done.returncode == 0 and "sandbox-local is the default kernel" in done.stdout, done.stderr
    with jupyter_server(tmp_path, env) as kernelspecs:
        specs = kernelspecs()
        assert specs["default"] == "sandbox-local" and {"python3", "sandbox-local"} <= set(specs["kernelspecs"])
    done = cli("install", "--user", "--backend", "local", "--default", "local", "--only", **env)
    assert done.returncode == 0 and "no other kernel is offered" in done.stdout, done.stderr
    with jupyter_server(tmp_path, env) as kernelspecs:
        specs = kernelspecs()
        assert specs["default"] == "sandbox-local" and set(specs["kernelspecs"]) == {"sandbox-local"}
    written = tmp_path / "config" / "jupyter_server_config.json"
    assert server_config.forget({"sandbox-local"}, [str(tmp_path / "config")]) == [written]
    assert json.loads(written.read_text()) == {}


def test_install_default_keeps_the_settings_already_there_and_refuses_only_alone(tmp_path):
    config = tmp_path / "etc" / "jupyter" / "jupyter_server_config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"ServerApp": {"terminals_enabled": False}}))
    done = cli("install", "--prefix", str(tmp_path), "--backend", "local", "--default", "local")
    assert done.returncode == 0, done.stderr
    assert json.loads(config.read_text()) == {"ServerApp": {"terminals_enabled": False},
                                              "MappingKernelManager": {"default_kernel_name": "sandbox-local"}}
    refused = cli("install", "--prefix", str(tmp_path), "--only")
    assert refused.returncode == 1 and refused.stderr == ("sandbox-kernel: --only needs --default NAME: the kernel "
                                                          "to offer alone.\n")
    config.write_text("{not json")
    broken = cli("install", "--prefix", str(tmp_path), "--backend", "local", "--default", "local")
    assert broken.returncode == 1 and "Traceback" not in broken.stderr and str(config) in broken.stderr

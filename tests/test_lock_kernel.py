"""The administrator's lock through real kernels: a sandbox-local kernel and a python3 kernel's
``%%sandbox`` magic, run by a Python environment whose ``etc/jupyter`` holds the lock (a venv
that sees this one's packages), so the lock binds those kernels and nothing else on the machine.
Each way a user could loosen a locked option is refused by the first cell, in one message; what
the lock allows runs."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

from tests.kernels import run, stdout

pytestmark = pytest.mark.kernel

LOCK = {"backends": ["local", "docker"], "output_policy": "sanitize",
        "LocalBackend": {"memory_limit": {"max": "2g"}, "env_vars": {"subset_of": []}},
        "DockerBackend": {"allow_hosts": {"subset_of": ["pypi.org"]}}}


@pytest.fixture(scope="module")
def locked_env(tmp_path_factory):
    """A venv (this one's packages through a .pth) with the lock in its ``etc/jupyter`` and its
    own kernelspec ``locked-local`` (memory_limit within the lock); yields its folder."""
    root = tmp_path_factory.mktemp("locked") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    purelib = Path(sysconfig.get_paths(vars={"base": str(root), "platbase": str(root)})["purelib"])
    # a site folder, so its own .pth files (an editable install's) are read too
    (purelib / "parent.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    (root / "etc" / "jupyter").mkdir(parents=True)
    (root / "etc" / "jupyter" / "sandbox_kernel_lock.json").write_text(json.dumps(LOCK))
    for name, argv in {"locked-local": ["-m", "sandbox_kernel", "-f", "{connection_file}",
                                        "--SandboxKernel.backend=local", "--LocalBackend.memory_limit=1g"],
                       "locked-docker": ["-m", "sandbox_kernel", "-f", "{connection_file}",
                                         "--SandboxKernel.backend=docker", "--DockerBackend.allow_hosts=pypi.org",
                                         "--SandboxKernel.egress_commands=allow"],
                       "locked-python3": ["-m", "ipykernel_launcher", "-f", "{connection_file}"]}.items():
        spec = root / "share" / "jupyter" / "kernels" / name
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({"argv": [str(root / "bin" / "python"), *argv],
                                                      "display_name": name, "language": "python"}))
    yield root


def first_cell(env: Path, kernel: str, code: str, *options: str, config: dict | None = None, tmp: Path) -> str:
    """What the first cell of ``kernel`` (of the locked venv) shows, stdout and errors together."""
    import os

    (tmp / "config").mkdir(exist_ok=True)
    if config is not None:  # the user's own config folder
        (tmp / "config" / "sandbox_kernel_config.json").write_text(json.dumps(config))
    environ = {**os.environ, "JUPYTER_PATH": str(env / "share" / "jupyter"), "JUPYTER_CONFIG_DIR": str(tmp / "config")}
    specs = KernelSpecManager(kernel_dirs=[str(env / "share" / "jupyter" / "kernels")])
    km = KernelManager(kernel_name=kernel, kernel_spec_manager=specs)
    km.start_kernel(env=environ, extra_arguments=list(options))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        reply, outputs = run(kc, code)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    errors = [f"{m['content']['ename']}: {m['content']['evalue']}" for m in outputs if m["msg_type"] == "error"]
    return stdout(outputs) + stdout(outputs, "stderr") + "".join(errors)


REFUSED = "Refused by the administrator's lock ({lock}): "


def test_what_the_lock_allows_runs(locked_env, tmp_path):
    shown = first_cell(locked_env, "locked-local", "import sys; print(sys.prefix != '')", tmp=tmp_path)
    assert shown == "True\n"


def test_an_option_on_the_kernels_argv_is_refused(locked_env, tmp_path):
    lock = locked_env / "etc" / "jupyter" / "sandbox_kernel_lock.json"
    shown = first_cell(locked_env, "locked-local", "print('ran')", "--SandboxKernel.output_policy=trust", tmp=tmp_path)
    assert REFUSED.format(lock=lock) + ("output_policy may be at most 'sanitize' (sanitize < isolate < trust), "
                                        "not 'trust'.") in shown
    assert "ran" not in shown and "Traceback" not in shown


def test_an_option_in_the_users_config_file_is_refused(locked_env, tmp_path):
    lock = locked_env / "etc" / "jupyter" / "sandbox_kernel_lock.json"
    shown = first_cell(locked_env, "locked-local", "print('ran')", tmp=tmp_path,
                       config={"LocalBackend": {"env_vars": ["HOME"]}})
    assert REFUSED.format(lock=lock) + "LocalBackend.env_vars may only hold [], not ['HOME']." in shown
    assert "ran" not in shown


def test_a_magic_line_is_refused(locked_env, tmp_path):
    lock = locked_env / "etc" / "jupyter" / "sandbox_kernel_lock.json"
    code = ("%load_ext magics\n"
            "get_ipython().run_cell_magic('sandbox', '--backend local --memory-limit 1g --output-policy trust', "
            "'print(\"ran\")')\n")
    shown = first_cell(locked_env, "locked-python3", code, tmp=tmp_path)
    assert shown == ("UsageError: " + REFUSED.format(lock=lock) + "output_policy may be at most 'sanitize' (sanitize < "
                     "isolate < trust), not 'trust'.\n")
    code = "%load_ext magics\nget_ipython().run_cell_magic('sandbox', '--backend local --memory-limit 3g', 'print(1)')"
    shown = first_cell(locked_env, "locked-python3", code, tmp=tmp_path)
    assert shown == ("UsageError: " + REFUSED.format(lock=lock) + "LocalBackend.memory_limit must be at most 2 GiB, "
                     "not 3 GiB.\n")


def test_allowing_a_host_at_runtime_is_refused(locked_env, tmp_path):
    """The kernel's ``%sandbox allow`` cannot loosen a locked allowlist (before the sandbox starts,
    so no engine is needed: the list would apply when it does). The magic's and the API's go the
    same way (``SandboxSession.allow``): tests/test_lock.py."""
    lock = locked_env / "etc" / "jupyter" / "sandbox_kernel_lock.json"
    shown = first_cell(locked_env, "locked-docker", "%sandbox allow evil.example", tmp=tmp_path)
    assert shown == ("Locked: " + REFUSED.format(lock=lock) + "DockerBackend.allow_hosts may only hold ['pypi.org'], "
                     "not ['evil.example'].")

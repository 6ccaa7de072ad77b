"""Environment values inside (issue 30): ``env`` sets NAME=value pairs in the sandbox on every backend
(unlike ``env_vars``, which copies host values by name), through the installed kernelspec; the
value is never shown in outputs, ``%sandbox status``, ``describe()`` or the kernel's debug log."""

from __future__ import annotations

import os
import secrets

import pytest
from jupyter_client.manager import KernelManager

from tests.kernels import kernel, run, stdout
from tests.support.backends import prepared
from tests.targets import backend_of

pytestmark = pytest.mark.timeout(300)

NAMES = ["local", "docker", "docker_api", "e2b", "gateway"]
CLASSES = {"local": "LocalBackend", "docker": "DockerBackend", "e2b": "E2BBackend", "gateway": "GatewayBackend"}


@pytest.mark.parametrize("backend_name", NAMES)
def test_env_values_reach_the_sandbox_and_no_output(backend_name):
    value = f"/data/{secrets.token_hex(8)}"
    option = f"--{CLASSES[backend_of(backend_name)]}.env=SEABORN_DATA={value}"
    with kernel(backend_name, option, f"--{CLASSES[backend_of(backend_name)]}.env=OTHER=x=y") as (_, kc):
        reply, outputs = run(kc, "import os\nprint(os.environ['SEABORN_DATA'], os.environ['OTHER'])", timeout=120)
        assert reply["status"] == "ok" and stdout(outputs) == f"{value} x=y\n"
        reply, outputs = run(kc, "%sandbox status")
        assert "SEABORN_DATA" in stdout(outputs) and value not in str([m["content"] for m in outputs])
        reply, outputs = run(kc, "raise ValueError('boom')")
        assert value not in str(reply) + str([m["content"] for m in outputs])


@pytest.mark.parametrize("backend_name", ["local", "docker"])
def test_env_values_stay_out_of_the_kernel_s_debug_log(backend_name, tmp_path):
    value = secrets.token_hex(12)
    setup = prepared(backend_name)
    km = KernelManager(kernel_name=f"sandbox-{backend_name}")
    log = tmp_path / "kernel.log"
    with open(log, "wb") as sink:
        km.start_kernel(extra_arguments=[*setup.kernel_options, f"--{CLASSES[backend_name]}.env=TOKEN={value}",
                                         "--Application.log_level=DEBUG"],
                        env={**os.environ, **setup.kernel_env}, stdout=sink, stderr=sink)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        reply, outputs = run(kc, "import os\nprint(len(os.environ['TOKEN']))", timeout=120)
        assert stdout(outputs) == "24\n"
    finally:
        kc.stop_channels()
        km.shutdown_kernel()
    text = log.read_text(errors="replace")
    assert "Searching path" in text and value not in text  # a debug line of the config loading; no value

"""``sandbox-kernel image build --kernel NAME`` reads a kernelspec's options as its kernel would, in
process (the build itself: tests/test_image_ahead.py): the command a building cell names, and the
one-line refusals."""

from __future__ import annotations

import json
import sys

import pytest

from sandbox_kernel.core.errors import ConfigError

pytestmark = pytest.mark.unit


@pytest.fixture
def kernels(tmp_path, monkeypatch):
    """Two kernelspecs in a JUPYTER_PATH of their own, and no user config."""
    for name, backend, options in (("sandbox-docker-ml", "docker", ["--DockerBackend.packages=seaborn",
                                                                    "--DockerBackend.packages=scipy>=1.14"]),
                                   ("sandbox-local-x", "local", [])):
        spec = tmp_path / "share" / "kernels" / name
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "sandbox_kernel", "-f", "{connection_file}",
                     f"--SandboxKernel.backend={backend}", *options], "display_name": name, "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "share"))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(tmp_path / "config"))


def test_a_kernelspec_s_options_make_the_command_a_cell_names(kernels):
    from sandbox_kernel.backends.docker import DockerBackend
    from sandbox_kernel.backends.docker.images.for_kernel import build_command, kernel_config

    backend = DockerBackend(config=kernel_config("sandbox-docker-ml", ["--DockerBackend.build_base=my/base:1"]))
    assert backend.packages == ["seaborn", "scipy>=1.14"] and backend.build_base == "my/base:1"
    assert build_command(backend) == ("sandbox-kernel image build --DockerBackend.packages=seaborn "
                                      "'--DockerBackend.packages=scipy>=1.14' --DockerBackend.build_base=my/base:1")
    assert build_command(DockerBackend()) == "sandbox-kernel image build"


def test_a_kernelspec_without_an_image_is_one_line(kernels):
    from sandbox_kernel.backends.docker.images.for_kernel import kernel_config

    with pytest.raises(ConfigError, match="the kernelspec 'sandbox-local-x' runs the local backend: only docker"):
        kernel_config("sandbox-local-x", [])
    with pytest.raises(ConfigError, match=r"no kernelspec named 'nope' \(`sandbox-kernel list`"):
        kernel_config("nope", [])

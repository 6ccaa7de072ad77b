"""Images ahead of time (issue 30): ``sandbox-kernel image build --kernel NAME`` builds the image a
docker kernelspec's ``packages`` ask for, so a scripted run (nbclient, with a 30 s per-cell
timeout) passes on its first try; without it the first cell builds (24-62 s measured here, so a
30 s timeout usually fails it), and what the cell shows names the command. Real engine, real pip
(reading the wheels .ci/test-wheels-setup.sh downloaded, with no index: tests/support/wheels.py),
a kernelspec installed for the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError

from sandbox_kernel.backends.docker import DockerBackend
from sandbox_kernel.backends.docker.images.build import image_platform
from sandbox_kernel.backends.docker.images.packages import packages_tag
from tests.support.backends import prepared
from tests.support.wheels import offline_pip

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

PACKAGES = ["scikit-learn==1.9.1"]
"""Heavy enough that building it at the first cell usually takes longer than nbclient's 30 s here
(scipy and scikit-learn: 24-62 s measured with the wheels already downloaded), and used by no
other test. The kernel's pip copies the wheels from build/test-wheels/x86_64 into its wheelhouse."""
KERNEL = "sandbox-docker-files-ahead"
CELL = "import sklearn\nprint(sklearn.__version__)"


@pytest.fixture(scope="module")
def base(own_image) -> str:
    """The default image as one of this run's own (the packages image's tag follows its base's id)."""
    return own_image(DockerBackend().image)


@pytest.fixture
def kernelspec(tmp_path, docker_client, monkeypatch, base):
    """A docker kernelspec whose options ask for :data:`PACKAGES` on :func:`base`, found through
    JUPYTER_PATH; the packages image is removed before and after. Kernels started by the test
    (their host-side ``pip download``) inherit pip's offline settings from this process."""
    prepared("docker")
    for name, value in offline_pip(image_platform(docker_client, base).machine).items():
        monkeypatch.setenv(name, value)
    spec = tmp_path / "share" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    options = [f"--DockerBackend.image={base}", *(f"--DockerBackend.packages={p}" for p in PACKAGES)]
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "sandbox_kernel", "-f", "{connection_file}", "--SandboxKernel.backend=docker",
                 *options],
        "display_name": KERNEL, "language": "python", "interrupt_mode": "message"}))
    env = {**os.environ, "JUPYTER_PATH": str(tmp_path / "share")}
    tag = packages_tag(docker_client, base, PACKAGES)
    _remove(docker_client, tag)
    yield env, tag
    _remove(docker_client, tag)


def _remove(docker_client, tag: str) -> None:
    try:
        docker_client.images.remove(tag, force=True)
    except Exception:  # not there
        pass


def _notebook() -> nbformat.NotebookNode:
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CELL)],
                                    metadata={"kernelspec": {"name": KERNEL, "display_name": KERNEL}})


def _run(nb: nbformat.NotebookNode, env: dict[str, str], timeout: float) -> None:
    """nbclient's run of ``nb`` (it finds kernelspecs through JUPYTER_PATH in this process)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JUPYTER_PATH", env["JUPYTER_PATH"])
        NotebookClient(nb, timeout=timeout, kernel_name=KERNEL, startup_timeout=120).execute()


def test_a_scripted_run_that_builds_at_its_first_cell_is_told_the_command(kernelspec, base):
    nb = _notebook()
    started = time.monotonic()
    try:
        _run(nb, kernelspec[0], timeout=30)
    except CellTimeoutError:  # what happens here: the build takes 30-60 s
        print(f"timed out after {time.monotonic() - started:.0f} s")
    shown = "".join(o.get("data", {}).get("text/plain", "") for o in nb.cells[0].outputs)
    assert "the sandbox image with scikit-learn" in shown  # "Building ..." or, done in time, "Built ..."
    assert ("A scripted run, e.g. nbclient or papermill, should build it first: sandbox-kernel image build "
            f"--DockerBackend.image={base} --DockerBackend.packages=scikit-learn==1.9.1") in shown


def test_image_build_for_a_kernel_then_a_30_s_cell_timeout_passes_first_try(kernelspec):
    env, tag = kernelspec
    started = time.monotonic()
    built = subprocess.run([sys.executable, "-m", "sandbox_kernel", "image", "build", "--kernel", KERNEL], env=env,
                           capture_output=True, text=True, timeout=800)
    print(f"image build --kernel: {time.monotonic() - started:.0f} s")
    assert built.returncode == 0, built.stderr
    assert f"ready: {tag}" in built.stdout and "Step " in built.stdout  # the build's progress, then the result
    nb = _notebook()
    started = time.monotonic()
    _run(nb, env, timeout=30)
    print(f"nbclient run after it: {time.monotonic() - started:.1f} s")
    outputs = nb.cells[0].outputs
    assert [o.get("text") for o in outputs if o.get("output_type") == "stream"] == ["1.9.1\n"]
    assert not any("Building" in str(o.get("data", "")) for o in outputs)

"""Images for the engine's architecture: the platform names the build understands, the one short
message for an architecture it cannot serve, and an arm64 sandbox run under emulation on this
x86_64 engine (Debian's qemu-user-static with binfmt_misc; ``.ci/arm64-setup.sh`` builds
``sandbox-kernel:arm64`` with ``--platform linux/arm64``). The arm64 tests are slow: every
instruction in the sandbox is emulated."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandbox_kernel.backends.docker.images import (
    PLATFORMS,
    engine_platform,
    image_platform,
    platform_of,
    wheelhouse_for,
)
from sandbox_kernel.core.errors import ImageBuildError
from tests.kernels import kernel, run, stdout
from tests.support.wheels import offline_pip
from tests.targets import skip_or_fail

ARM64_IMAGE = "sandbox-kernel:arm64"
BINFMT = Path("/proc/sys/fs/binfmt_misc/qemu-aarch64")


@pytest.mark.unit
@pytest.mark.parametrize("name, machine", [("x86_64", "x86_64"), ("amd64", "x86_64"), ("linux/amd64", "x86_64"),
                                           ("aarch64", "aarch64"), ("arm64", "aarch64"), ("linux/arm64", "aarch64"),
                                           ("linux/arm64/v8", "aarch64")])
def test_platform_names(name, machine):
    assert platform_of(name) is PLATFORMS[machine]


@pytest.mark.unit
def test_pip_tags_and_wheelhouse_follow_the_architecture(tmp_path):
    x86, arm = PLATFORMS["x86_64"], PLATFORMS["aarch64"]
    assert x86.docker == "linux/amd64" and arm.docker == "linux/arm64"
    assert "manylinux1_x86_64" in x86.pip_platforms and "manylinux_2_36_x86_64" in x86.pip_platforms
    assert arm.pip_platforms[0] == "manylinux_2_36_aarch64" and arm.pip_platforms[-1] == "manylinux2014_aarch64"
    assert not any("x86_64" in tag for tag in arm.pip_platforms)
    assert wheelhouse_for(tmp_path, x86) != wheelhouse_for(tmp_path, arm)


@pytest.mark.unit
@pytest.mark.parametrize("name", ["armv7l", "s390x", "linux/ppc64le", "riscv64"])
def test_another_architecture_is_one_short_message(name):
    with pytest.raises(ImageBuildError) as caught:
        platform_of(name)
    assert str(caught.value) == ("sandbox images are built for x86_64 (linux/amd64) and aarch64 (linux/arm64) only, "
                                 f"not for {name!r}")


@pytest.mark.docker
def test_the_cli_refuses_another_platform_in_one_line(docker_client):
    cli = subprocess.run([sys.executable, "-m", "sandbox_kernel.backends.docker.images", "build",
                          "--platform", "linux/s390x", "--tag", "sandbox-kernel-test:s390x"],
                         capture_output=True, text=True, timeout=60)
    assert cli.returncode == 1 and cli.stdout == ""
    assert cli.stderr == ("error: sandbox images are built for x86_64 (linux/amd64) and aarch64 (linux/arm64) only, "
                          "not for 'linux/s390x'\n")


@pytest.mark.docker
def test_the_engine_architecture_is_read(docker_client):
    assert engine_platform(docker_client).machine == docker_client.info()["Architecture"]


def _require_arm64(docker_client) -> None:
    if not (BINFMT.is_file() and BINFMT.read_text().startswith("enabled")):
        skip_or_fail(f"qemu-aarch64 is not registered in binfmt_misc ({BINFMT}); run `bash .ci/arm64-setup.sh` as root")
    if not docker_client.images.list(name=ARM64_IMAGE):
        skip_or_fail(f"the image {ARM64_IMAGE} is missing; run `bash .ci/arm64-setup.sh` as root")


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_cell_in_an_arm64_sandbox_reports_aarch64(docker_client):
    _require_arm64(docker_client)
    assert image_platform(docker_client, ARM64_IMAGE) is PLATFORMS["aarch64"]
    started = time.monotonic()
    with kernel("docker", f"--DockerBackend.image={ARM64_IMAGE}") as (km, kc):
        reply, outputs = run(kc, "import platform\nprint(platform.machine())", timeout=180)
        first = time.monotonic() - started
        warm, again = run(kc, "print(6 * 7)", timeout=60)
    print(f"arm64 under qemu: kernel start + first cell {first:.1f} s, warm cell {again[-1]['t'] * 1000:.0f} ms")
    assert reply["status"] == "ok", reply
    assert stdout(outputs) == "aarch64\n"
    assert warm["status"] == "ok" and stdout(again) == "42\n"


@pytest.fixture
def arm64_base(docker_client, own_image) -> str:
    """sandbox-kernel:arm64 as an image of this run's own (a packages image's tag follows its base's id)."""
    _require_arm64(docker_client)
    return own_image(ARM64_IMAGE)


@pytest.fixture
def pyyaml_arm64(docker_client, monkeypatch, arm64_base):
    """The tag of :func:`arm64_base` plus pyyaml (a C extension): absent at the start, removed at the end.
    The backend's ``pip download`` reads build/test-wheels/aarch64 (.ci/test-wheels-setup.sh), no index."""
    from sandbox_kernel.backends.docker.images.packages import packages_tag

    def remove():
        try:
            docker_client.images.remove(tag)
        except Exception:  # not there, or in use by a container being removed
            pass

    _require_arm64(docker_client)
    for name, value in offline_pip("aarch64").items():
        monkeypatch.setenv(name, value)
    tag = packages_tag(docker_client, arm64_base, ["pyyaml"])
    yield tag
    remove()


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_packages_on_an_arm64_image_get_aarch64_wheels(docker_client, arm64_base, pyyaml_arm64):
    from tests.support.backends import backends
    from tests.support.recorder import Recorder

    started = time.monotonic()
    async with backends("docker") as make:
        backend = make(image=arm64_base, packages=["pyyaml"])
        rec = Recorder()
        outcome = await backend.execute("import platform, yaml\nprint(platform.machine(), yaml.__with_libyaml__)", rec)
        image = backend.describe()["image"]
    print(f"arm64 under qemu: pyyaml packages build + start + first cell {time.monotonic() - started:.1f} s")
    assert outcome.status == "ok" and rec.text() == "aarch64 True\n"  # libyaml's binding: the aarch64 wheel
    assert image == pyyaml_arm64 and image_platform(docker_client, image) is PLATFORMS["aarch64"]

"""The sandbox images built by .ci/docker-setup.sh, checked against a real Docker engine."""

from __future__ import annotations

import pytest

from sandbox_kernel.backends.docker.images import image_has_ipykernel
from sandbox_kernel.core.errors import Missing

pytestmark = pytest.mark.kernel

docker = pytest.importorskip("docker", reason="docker-py missing: pip install docker")

SANDBOX_IMAGE = "sandbox-kernel:latest"
BASE_IMAGE = "sandbox-kernel-base:bookworm"


@pytest.fixture(scope="module")
def client():
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        pytest.skip(f"no Docker engine: {exc} (run .ci/docker-setup.sh as root)")
    yield client
    client.close()


def _require(client, image: str) -> None:
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        pytest.fail(f"image {image} missing: build it with .ci/docker-setup.sh")


def test_sandbox_image_has_ipykernel(client):
    _require(client, SANDBOX_IMAGE)
    assert image_has_ipykernel(client, SANDBOX_IMAGE)


def test_base_image_without_ipykernel_is_reported(client):
    _require(client, BASE_IMAGE)
    assert not image_has_ipykernel(client, BASE_IMAGE)


def test_missing_image_is_not_pulled(client):
    with pytest.raises(Missing):
        image_has_ipykernel(client, "sandbox-kernel-test:does-not-exist")

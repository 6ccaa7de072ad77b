"""Sandbox images with extra Python packages: an image plus pip requirements, built offline.

The wheels are downloaded on the host (:func:`~sandbox_kernel.backends.docker.images.build.download_wheelhouse`,
the same wheelhouse as the default image, so a prepared wheelhouse works air-gapped), only the
ones the requirements need are sent to the engine, and ``packages.Dockerfile`` installs them with
``pip --no-index``. The image is tagged ``sandbox-kernel-packages:DIGEST``, a digest of the recipe,
the base image's id and the requirements, and reused while they are unchanged.
"""

from __future__ import annotations

import hashlib
import re
import tarfile
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ....core.errors import ImageBuildError, RequirementNotFound
from ..boundary import engine_errors, local_image, remove_image_if_unused
from .build import BASE_LABEL, download_wheelhouse, image_platform, needed_wheels, run_build

if TYPE_CHECKING:
    import docker

REPOSITORY = "sandbox-kernel-packages"
PACKAGES_LABEL = "org.sandbox-kernel.packages"
"""Image label holding the requirements an image was built with, one per line."""
BUILDER_LABEL = "org.sandbox-kernel.builder=packages"
_RECIPE = [resources.files(__package__) / name for name in ("packages.Dockerfile", "install_delta.py")]
_NOT_FOUND = re.compile(r"No matching distribution found for (\S+)")
_UNREACHABLE = re.compile(r"NewConnectionError|Could not fetch URL|ConnectTimeout|Name or service not known|"
                          r"Temporary failure in name resolution|ProxyError")


def packages_digest(base_id: str, packages: list[str]) -> str:
    """16 hex digits from the recipe, the base image's id (``sha256:...``) and the requirements."""
    digest = hashlib.sha256(base_id.encode())
    for part in [*(path.read_bytes() for path in _RECIPE), *(req.encode() for req in packages)]:
        digest.update(b"\0" + part)
    return digest.hexdigest()[:16]


def packages_tag(client: docker.DockerClient, base: str, packages: list[str]) -> str:
    """The tag of ``base`` plus ``packages``: ``sandbox-kernel-packages:DIGEST``.

    Raises:
        Missing: ``base`` is not present locally.
    """
    with engine_errors(f"inspect the image {base}"):
        return f"{REPOSITORY}:{packages_digest(client.api.inspect_image(base)['Id'], packages)}"


def _context(requirements: Path, wheels: list[Path]) -> IO[bytes]:
    context = tempfile.TemporaryFile()
    with tarfile.open(fileobj=context, mode="w") as tar:
        recipe, script = _RECIPE
        with resources.as_file(recipe) as path:
            tar.add(str(path), arcname="Dockerfile")
        with resources.as_file(script) as path:
            tar.add(str(path), arcname="install_delta.py")
        tar.add(str(requirements), arcname="requirements.txt")
        for wheel in wheels:
            tar.add(str(wheel), arcname=f"wheels/{wheel.name}")
    context.seek(0)
    return context


def build_packages_image(client: docker.DockerClient, base: str, packages: list[str], *, wheelhouse: Path,
                         progress: Callable[[str], None] | None = None) -> str:
    """Build ``base`` plus the pip requirements ``packages`` (``["tqdm", "scikit-learn>=1.5"]``),
    unless :func:`packages_tag` is present already. Blocking.

    Wheels for CPython 3.11 on the manylinux of ``base``'s architecture (x86_64 or aarch64) are
    downloaded into ``wheelhouse`` (its folder for that architecture) by the host's pip when it
    lacks some (nothing is downloaded when it is complete); the image is built for that
    architecture. Measured here (2 cores): tqdm on
    sandbox-kernel:latest, 5-7 s the first time (+1-2 s for the download), an inspect afterwards.

    Args:
        client: A docker-py client.
        base: A local image whose ``python`` has pip (the default sandbox image has).
        packages: pip requirement strings.
        wheelhouse: Wheel directory, completed with pip if needed.
        progress: Called with each build log line.

    Returns:
        The image's tag.

    Raises:
        RequirementNotFound: no wheel of a requirement exists for the sandbox's Python.
        ImageBuildError: ``base`` is for an architecture wheels are not fetched for, or the
            download or the build failed otherwise (carries the log tail).
        Missing: ``base`` is not present locally.
        SandboxError: the engine failed otherwise (mapped by :func:`~..boundary.engine_errors`).
    """
    tag = packages_tag(client, base, packages)
    if local_image(client, tag) is not None:
        return tag
    platform = image_platform(client, base)
    with tempfile.TemporaryDirectory() as scratch:
        requirements = Path(scratch) / "requirements.txt"
        requirements.write_text("".join(f"{req}\n" for req in packages))
        if progress is not None:
            progress(f"Step 0: pip download {' '.join(packages)} (host, into {wheelhouse})")
        try:
            download_wheelhouse(wheelhouse, requirements, platform=platform)
        except ImageBuildError as exc:
            log = "\n".join(exc.log_tail)
            if match := _NOT_FOUND.search(log):
                raise RequirementNotFound(match.group(1), wheelhouse, platform.machine,
                                          not _UNREACHABLE.search(log)) from exc
            raise
        wheels = needed_wheels(wheelhouse, requirements, platform=platform)  # not the rest of a shared wheelhouse
        with engine_errors(f"inspect the image {base}"):
            user = client.api.inspect_image(base)["Config"].get("User") or "root"
        with _context(requirements, wheels) as context:
            run_build(client, context, tag, buildargs={"BASE": base, "BASE_USER": user},
                      labels={BASE_LABEL: base, PACKAGES_LABEL: "\n".join(packages)}, progress=progress,
                      platform=platform)
    _remove_builders(client)
    return tag


def _remove_builders(client: docker.DockerClient) -> None:
    """Remove the builder stages of packages images (untagged, labelled in packages.Dockerfile):
    they hold the wheels and a second copy of what was installed."""
    with engine_errors("list the builder stages of packages images"):
        builders = client.api.images(filters={"label": BUILDER_LABEL, "dangling": True})
    for image in builders:
        remove_image_if_unused(client, image["Id"])  # kept when used by a build running now

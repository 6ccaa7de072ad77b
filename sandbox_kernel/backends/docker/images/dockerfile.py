"""The user's own sandbox image: their Dockerfile, its folder as the build context, built with the
engine's legacy builder and tagged ``sandbox-kernel-user:DIGEST``, a digest of the context (what
``.dockerignore`` lets through: paths, modes, contents), the Dockerfile's name and the build
arguments. Rebuilt when one of them changes; the image it replaces is removed when unused.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ....core.errors import ImageBuildError
from ..boundary import engine_errors, local_image, remove_image_if_unused
from .build import run_build

if TYPE_CHECKING:
    import docker

REPOSITORY = "sandbox-kernel-user"
DOCKERFILE_LABEL = "org.sandbox-kernel.dockerfile"
"""Image label holding the absolute path of the Dockerfile an image was built from."""
BUILD_ARG = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)
_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", re.IGNORECASE | re.MULTILINE)


def from_images(dockerfile: Path) -> list[str]:
    """The images ``dockerfile``'s ``FROM`` lines name, without its own stages, ``scratch`` and
    names made of build arguments (``$BASE``). Raises OSError when it cannot be read."""
    stages, images = set(), []
    for image, stage in _FROM.findall(Path(dockerfile).read_text()):
        if image.lower() not in stages and image != "scratch" and "$" not in image and image not in images:
            images.append(image)
        if stage:
            stages.add(stage.lower())
    return images


def parse_build_args(items: list[str]) -> dict[str, str]:
    """``["NAME=value", ...]`` → ``{"NAME": "value"}`` (a later NAME wins).

    Raises:
        ValueError: an item is not ``NAME=value``.
    """
    for item in items:
        if not BUILD_ARG.fullmatch(item):
            raise ValueError(f"a build argument is NAME=value, not {item!r}")
    return dict(item.split("=", 1) for item in items)


def _ignore_patterns(folder: Path) -> list[str]:
    ignore = folder / ".dockerignore"
    if not ignore.is_file():
        return []
    lines = (line.strip() for line in ignore.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def context_digest(dockerfile: Path, build_args: dict[str, str]) -> str:
    """16 hex digits from the build context of ``dockerfile`` (its folder, as docker-py sends it),
    its name and ``build_args``. Reads every file of the context.

    Raises:
        FileNotFoundError: ``dockerfile`` is not a file.
    """
    from docker.utils.build import exclude_paths

    dockerfile = Path(dockerfile)
    if not dockerfile.is_file():
        raise FileNotFoundError(f"the Dockerfile {dockerfile} does not exist")
    folder = dockerfile.parent
    digest = hashlib.sha256(f"{dockerfile.name}\0{sorted(build_args.items())!r}".encode())
    for relative in sorted(exclude_paths(str(folder), _ignore_patterns(folder), dockerfile=dockerfile.name)):
        path = folder / relative
        stat = path.lstat()
        digest.update(f"\0{relative}\0{stat.st_mode:o}\0".encode())
        if path.is_symlink():
            digest.update(os.readlink(path).encode())
        elif path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def dockerfile_tag(dockerfile: Path, build_args: dict[str, str]) -> str:
    """``sandbox-kernel-user:DIGEST`` (see :func:`context_digest`)."""
    return f"{REPOSITORY}:{context_digest(dockerfile, build_args)}"


def build_dockerfile_image(client: docker.DockerClient, dockerfile: Path, build_args: dict[str, str], *,
                           progress: Callable[[str], None] | None = None) -> str:
    """Build the user's ``dockerfile`` with ``build_args`` unless :func:`dockerfile_tag` is present;
    then remove, when nothing uses them, older images built from the same Dockerfile. Blocking.
    Its ``FROM`` images must be present locally when no registry is reachable.

    Returns:
        The image's tag.

    Raises:
        ImageBuildError: ``dockerfile`` or its folder cannot be read, or the engine refused or
            failed the build (carries the log tail).
        SandboxError: the engine failed otherwise (mapped by :func:`~..boundary.engine_errors`).
    """
    dockerfile = Path(dockerfile).expanduser().absolute()
    try:
        tag = dockerfile_tag(dockerfile, build_args)
    except OSError as exc:  # not an engine error: the Dockerfile or its folder cannot be read
        raise ImageBuildError(f"{exc} (the dockerfile option: the path of a Dockerfile, whose folder is "
                              "the build context)") from exc
    if local_image(client, tag) is not None:
        return tag
    try:
        image_id = run_build(client, None, tag, buildargs=build_args, progress=progress, path=str(dockerfile.parent),
                             dockerfile=dockerfile.name, labels={DOCKERFILE_LABEL: str(dockerfile)})
    except ImageBuildError as exc:
        if exc.engine_error is None:
            raise
        missing = [image for image in from_images(dockerfile) if local_image(client, image) is None]
        hint = (f" (its FROM image {', '.join(missing)} is not present locally, and the engine could not pull it: "
                "`docker load` or build it first; FROM sandbox-kernel:latest works offline)") if missing else ""
        raise ImageBuildError(f"building {dockerfile} failed: {exc.engine_error}{hint}", exc.log_tail) from exc
    with engine_errors("list the images built from the Dockerfile"):
        built = client.api.images(filters={"label": f"{DOCKERFILE_LABEL}={dockerfile}"})
    for old in built:
        if old["Id"] != image_id:
            remove_image_if_unused(client, old["Id"])  # kept when in use by a container, or tagged elsewhere
    return tag

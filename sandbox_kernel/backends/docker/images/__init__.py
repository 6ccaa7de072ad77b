"""Sandbox images: the default Dockerfile, the builder and the ipykernel check.

``python -m sandbox_kernel.backends.docker.images build`` builds the default image from a wheelhouse without
reaching a package index from inside the build; see README.md in this folder for the
air-gapped path and the base image made from Debian packages.
"""

from ....core.errors import ImageBuildError
from .build import (
    BASE_LABEL,
    DEFAULT_TAG,
    DOCKERFILE,
    EGRESS,
    PLATFORMS,
    RECIPE_LABEL,
    REQUIREMENTS,
    SANDBOX,
    Platform,
    Recipe,
    build_image,
    download_wheelhouse,
    engine_platform,
    image_has_ipykernel,
    image_is_current,
    image_platform,
    platform_of,
    recipe_digest,
    wheelhouse_for,
)

__all__ = [
    "BASE_LABEL",
    "DEFAULT_TAG",
    "DOCKERFILE",
    "EGRESS",
    "PLATFORMS",
    "RECIPE_LABEL",
    "REQUIREMENTS",
    "SANDBOX",
    "ImageBuildError",
    "Platform",
    "Recipe",
    "build_image",
    "download_wheelhouse",
    "engine_platform",
    "image_has_ipykernel",
    "image_is_current",
    "image_platform",
    "platform_of",
    "recipe_digest",
    "wheelhouse_for",
]

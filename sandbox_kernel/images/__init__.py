"""Sandbox images: the default Dockerfile, the builder and the ipykernel check.

``python -m sandbox_kernel.images build`` builds the default image from a wheelhouse without
reaching a package index from inside the build; see README.md in this folder for the
air-gapped path and the base image made from Debian packages.
"""

from sandbox_kernel.images.build import (
    DOCKERFILE,
    REQUIREMENTS,
    ImageBuildError,
    build_image,
    download_wheelhouse,
    image_has_ipykernel,
)

__all__ = [
    "DOCKERFILE",
    "REQUIREMENTS",
    "ImageBuildError",
    "build_image",
    "download_wheelhouse",
    "image_has_ipykernel",
]

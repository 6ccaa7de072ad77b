"""The user's environment in a docker sandbox: which image a session runs (the configured one,
one built from the user's Dockerfile, plus their pip packages) and which Jupyter kernel inside it
(ipykernel through the backend's launcher, or a kernelspec installed in the image).

Blocking functions, run in a thread by :class:`~sandbox_kernel.backends.docker.DockerBackend`.
Image building lives in :mod:`sandbox_kernel.backends.docker.images`; engine errors are mapped by
:func:`~sandbox_kernel.backends.docker.boundary.engine_errors`.
"""

from __future__ import annotations

import contextlib
import io
import json
import posixpath
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...core.errors import Missing, SandboxStartError
from .boundary import engine_errors
from .engine import OWNER_LABEL, owner
from .image import EGRESS, BuildProgress, _build_lock, default_wheelhouse, ensure_image, is_ours
from .spec import KERNEL_DIR

JUPYTER_DIRS = ("/usr/local/share/jupyter", "/usr/share/jupyter", "/opt/conda/share/jupyter")
"""Jupyter data directories of an image looked in for kernelspecs, after those its environment
names (``JUPYTER_PATH``, ``JUPYTER_DATA_DIR``, ``VIRTUAL_ENV``, ``CONDA_PREFIX``, ``HOME``), in
jupyter_client's order (user, environment, system)."""


def check_option(name: str, values: list[str]) -> list[str]:
    """Validate the ``packages`` (pip requirements) or ``build_args`` (``NAME=value``) option.

    Raises:
        TraitError: one line naming the bad item.
    """
    from traitlets import TraitError

    if name == "build_args":
        from .images.dockerfile import parse_build_args

        try:
            parse_build_args(values)
        except ValueError as exc:
            raise TraitError(f"build_args: {exc}") from None
        return values
    from packaging.requirements import InvalidRequirement, Requirement

    for item in values:
        try:
            Requirement(item)
        except InvalidRequirement as exc:
            raise TraitError(f"packages: {item!r} is not a pip requirement ({str(exc).splitlines()[0]})") from None
    return values


def _titled(progress: Callable[[str], None], what: str, note: str) -> None:
    if isinstance(progress, BuildProgress):
        progress.what, progress.note = what, note


def prepare_image(client: Any, backend: Any, progress: Callable[[str], None]) -> tuple[str, dict[str, Any] | None]:
    """The image a :class:`DockerBackend` runs, built first when needed, and the kernelspec of its
    ``kernel_name`` (None: ipykernel through the launcher). Blocking.

    ``dockerfile`` replaces ``image``; ``packages`` are added on top of either.

    Raises:
        SandboxStartError: a build failed, a requirement has no wheel, the Dockerfile or the
            kernelspec is missing (each message names it and the fix).
        BackendUnavailable: no engine, or the default image is missing with ``auto_build`` off.
    """
    from ...core.errors import ImageBuildError, RequirementNotFound
    from .images.dockerfile import build_dockerfile_image, from_images, parse_build_args
    from .images.packages import build_packages_image

    wheelhouse = Path(backend.build_wheelhouse) if backend.build_wheelhouse else default_wheelhouse()
    image = backend.image
    try:
        if backend.dockerfile:
            dockerfile = Path(backend.dockerfile).expanduser()
            with contextlib.suppress(OSError):  # FROM sandbox-kernel:latest: built first when missing
                for base in filter(is_ours, from_images(dockerfile)):
                    ensure_image(client, base, auto_build=backend.auto_build, base=backend.build_base,
                                 wheelhouse=backend.build_wheelhouse, progress=progress)
            _titled(progress, f"the sandbox image from {dockerfile}", "it changed, or first use")
            with engine_errors(f"build {dockerfile}"), _build_lock:
                image = build_dockerfile_image(client, dockerfile, parse_build_args(backend.build_args),
                                               progress=progress)
        else:
            ensure_image(client, image, auto_build=backend.auto_build, base=backend.build_base,
                         wheelhouse=backend.build_wheelhouse, progress=progress)
        if backend.packages:
            _titled(progress, f"the sandbox image with {', '.join(backend.packages)}", "once for these packages")
            with engine_errors(f"inspect the image {image}"), _build_lock:
                image = build_packages_image(client, image, list(backend.packages), wheelhouse=wheelhouse,
                                             progress=progress)
        if backend.allow_hosts or backend.host_secrets:
            _titled(progress, f"the egress proxy's image {backend.egress_image}", EGRESS.note)
            ensure_image(client, backend.egress_image, auto_build=backend.auto_build,
                         wheelhouse=backend.build_wheelhouse, progress=progress, kind=EGRESS)
    except RequirementNotFound as exc:
        raise SandboxStartError(f"Could not add the packages to the sandbox image: {exc.message}.") from exc
    except ImageBuildError as exc:
        tail = "\n".join(line for line in exc.log_tail[-5:] if line.strip())
        raise SandboxStartError(f"Could not build the sandbox image: {exc.message}."
                                + (f"\nLast lines of the build:\n{tail}" if tail else "")) from exc
    kernelspec = read_kernelspec(client, image, backend.kernel_name) if backend.kernel_name else None
    return image, kernelspec


def _data_dirs(env: dict[str, str]) -> list[str]:
    dirs = [d for d in env.get("JUPYTER_PATH", "").split(":") if d]
    dirs.append(env.get("JUPYTER_DATA_DIR") or posixpath.join(env.get("HOME", "/root"), ".local/share/jupyter"))
    dirs += [posixpath.join(env[var], "share/jupyter") for var in ("VIRTUAL_ENV", "CONDA_PREFIX") if env.get(var)]
    return list(dict.fromkeys([*dirs, *JUPYTER_DIRS]))


def read_kernelspec(client: Any, image: str, name: str) -> dict[str, Any]:
    """The kernelspec ``name`` installed in ``image``: its ``kernel.json`` (``argv``, ``env``,
    ``language``, ...) plus ``resource_dir``. Read through the archive API from a container that
    is created, never started (no Python needed in the image). Blocking; about 0.1-0.3 s.

    Raises:
        SandboxStartError: no such kernelspec in the image's Jupyter data directories.
    """
    doing = f"look for the kernelspec {name!r} in {image}"
    with engine_errors(doing):
        env = dict(item.split("=", 1) for item in client.api.inspect_image(image)["Config"].get("Env") or [])
        container = client.api.create_container(image, entrypoint=["/nonexistent"], command=[], network_disabled=True,
                                                labels={OWNER_LABEL: owner()})  # gc finds it if we die here
        try:
            dirs = [posixpath.join(d, "kernels", name) for d in _data_dirs(env)]
            for folder in dirs:
                try:
                    with engine_errors(doing):
                        chunks, _ = client.api.get_archive(container["Id"], f"{folder}/kernel.json")
                except Missing:
                    continue
                with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tar:
                    spec = json.loads(tar.extractfile(tar.next()).read())
                return {**spec, "resource_dir": folder}
        finally:
            client.api.remove_container(container["Id"], force=True)
    raise SandboxStartError(
        f"The image {image!r} has no Jupyter kernel named {name!r} (looked in {', '.join(dirs)}). Fix: check the "
        f"name (`docker run --rm {image} jupyter kernelspec list`), or install it in the image, e.g. "
        "`RUN python -m bash_kernel.install --sys-prefix` in its Dockerfile.")


def use_image(spec: dict[str, Any], image: str, kernelspec: dict[str, Any] | None,
              relayed: bool = False) -> dict[str, Any]:
    """Make the container ``spec`` (see :func:`~.spec.container_spec`) run ``image`` and,
    given a kernelspec, that kernel on the session's connection file instead of ipykernel's
    launcher (under the ``api`` transport, ``relayed``, the relay starts it: see
    :func:`kernel_argv`). The hardening of ``spec`` is untouched."""
    spec["image"] = image
    if kernelspec:
        if not relayed:
            argv = [arg.replace("{connection_file}", f"{KERNEL_DIR}/kernel.json") for arg in kernel_argv(kernelspec)]
            spec.update(entrypoint=argv[:1], command=argv[1:])
        spec["environment"] = {**spec["environment"], **(kernelspec.get("env") or {})}
    return spec


def kernel_argv(kernelspec: dict[str, Any]) -> list[str]:
    """The kernelspec's ``argv`` with its ``{resource_dir}`` filled in (``{connection_file}``
    is left for whoever writes the connection file)."""
    return [arg.replace("{resource_dir}", kernelspec["resource_dir"]) for arg in kernelspec["argv"]]

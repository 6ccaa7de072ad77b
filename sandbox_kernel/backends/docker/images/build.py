"""Build the default sandbox image from a wheelhouse, and check images for ipykernel.

No step needs a container registry or a package index inside the build: wheels for the image's
Python (CPython 3.11 on manylinux x86_64 or aarch64, the python3 of Debian bookworm and of
``python:3.11-slim-bookworm``) are downloaded on the host by :func:`download_wheelhouse`, sent to
the engine in the build context and installed with ``pip install --no-index``.

Images are built for the engine's architecture (``docker info``: ``x86_64`` or ``aarch64``) unless
a :class:`Platform` is given; the wheels of each architecture are kept in their own subfolder of
the wheelhouse (:func:`wheelhouse_for`).

docker-py is imported lazily: callers pass a ``docker.DockerClient``.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse
from collections.abc import Callable, Iterable
from importlib import resources
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ....core.errors import ImageBuildError, Refused
from ..boundary import engine_errors, local_image, remove_image_if_unused, wait_exited

if TYPE_CHECKING:
    import docker

DOCKERFILE = resources.files(__package__) / "Dockerfile"
REQUIREMENTS = resources.files(__package__) / "requirements.txt"


@dataclasses.dataclass(frozen=True)
class Recipe:
    """What an image is built from: its Dockerfile, its requirements (wheels downloaded on the
    host) and the CPython version of its base (``X.Y``), which the wheels are chosen for."""

    dockerfile: Any
    requirements: Any
    python: str = "3.11"

    @property
    def abi(self) -> str:
        return "cp" + self.python.replace(".", "")


SANDBOX = Recipe(DOCKERFILE, REQUIREMENTS)
"""The default sandbox image's recipe (Debian bookworm's Python 3.11)."""
EGRESS_TAG = "sandbox-kernel-egress:latest"
EGRESS_BASE = "python:3.13-slim-trixie"
EGRESS = Recipe(resources.files(__package__) / "egress.Dockerfile",
                resources.files(__package__) / "egress-requirements.txt", python="3.13")
"""The docker backend's egress proxy (mitmproxy, which needs Python 3.12 or later: Debian trixie's 3.13)."""
DEFAULT_BASE = "python:3.11-slim-bookworm"
DEFAULT_TAG = "sandbox-kernel:latest"
LOG_TAIL_LINES = 20
RECIPE_LABEL = "org.sandbox-kernel.recipe"
"""Image label holding :func:`recipe_digest` of the recipe an image was built from."""
BASE_LABEL = "org.sandbox-kernel.base"
"""Image label holding the base image an image was built from (a rebuild uses it again)."""
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the engine colours RUN stderr red


@dataclasses.dataclass(frozen=True)
class Platform:
    """An architecture sandbox images are built for.

    Attributes:
        machine: its ``uname -m`` name, as ``docker info`` (``Architecture``) and
            ``platform.machine()`` in the sandbox say it: ``x86_64``, ``aarch64``.
        docker: the engine's platform: ``linux/amd64``, ``linux/arm64``.
        oldest_glibc: the oldest manylinux glibc minor version that exists for it.
        legacy: the manylinux aliases of it (``manylinux2014_x86_64``, ...).
    """

    machine: str
    docker: str
    oldest_glibc: int
    legacy: tuple[str, ...]

    @property
    def pip_platforms(self) -> list[str]:
        """pip ``--platform`` tags. pip matches them literally (no manylinux expansion when a
        platform is given), so every glibc level up to bookworm's 2.36 is listed, then the
        legacy aliases."""
        return [f"manylinux_2_{minor}_{self.machine}" for minor in range(36, self.oldest_glibc - 1, -1)] + [
            f"{alias}_{self.machine}" for alias in self.legacy]

    def __str__(self) -> str:
        return f"{self.machine} ({self.docker})"


PLATFORMS = {
    "x86_64": Platform("x86_64", "linux/amd64", 5, ("manylinux2014", "manylinux2010", "manylinux1")),
    "aarch64": Platform("aarch64", "linux/arm64", 17, ("manylinux2014",)),
}
"""The architectures images are built for, by ``uname -m`` name."""
_ALIASES = {"amd64": "x86_64", "x86-64": "x86_64", "arm64": "aarch64", "arm64/v8": "aarch64"}


def platform_of(name: str) -> Platform:
    """The :class:`Platform` named ``name``: a ``uname -m`` name (``x86_64``, ``aarch64``), a Go
    one (``amd64``, ``arm64``, as image configs and Podman say it) or a docker platform
    (``linux/amd64``, ``linux/arm64``, ``linux/arm64/v8``).

    Raises:
        ImageBuildError: no images are built for that architecture (one line naming it and the
            supported ones).
    """
    key = name.strip().lower().removeprefix("linux/")
    key = _ALIASES.get(key, key)
    if key in PLATFORMS:
        return PLATFORMS[key]
    raise ImageBuildError(_unsupported(f"not for {name!r}"))


def _unsupported(what: str) -> str:
    return f"sandbox images are built for {' and '.join(str(p) for p in PLATFORMS.values())} only, {what}"


def engine_platform(client: docker.DockerClient) -> Platform:
    """The :class:`Platform` of the engine ``client`` talks to (``docker info``'s
    ``Architecture``), which an image built without a platform is built for.

    Raises:
        ImageBuildError: the engine's architecture is not one images are built for.
        SandboxError: the engine failed (mapped by :func:`~..boundary.engine_errors`).
    """
    with engine_errors("ask the Docker engine for its architecture"):
        architecture = client.info().get("Architecture") or "unknown"
    try:
        return platform_of(architecture)
    except ImageBuildError:
        raise ImageBuildError(_unsupported(f"and the Docker engine's architecture is {architecture}: use an engine "
                                           "of one of these, or an image built for it (--DockerBackend.image)")) from None


def image_platform(client: docker.DockerClient, image: str) -> Platform:
    """The :class:`Platform` of the local ``image`` (its config's ``Architecture``).

    Raises:
        ImageBuildError: the image is for an architecture images are not built for.
        Missing: ``image`` is not present locally.
    """
    with engine_errors(f"inspect the image {image}"):
        architecture = client.api.inspect_image(image).get("Architecture") or "unknown"
    try:
        return platform_of(architecture)
    except ImageBuildError:
        raise ImageBuildError(_unsupported(f"and the image {image} is for {architecture}")) from None


def wheelhouse_for(wheelhouse: Path, platform: Platform, recipe: Recipe = SANDBOX) -> Path:
    """The folder of ``wheelhouse`` that holds ``platform``'s wheels: ``WHEELHOUSE/x86_64``,
    ``WHEELHOUSE/aarch64``, so builds for two architectures never mix their wheels (for another
    Python than 3.11: ``WHEELHOUSE/x86_64-cp313``)."""
    return Path(wheelhouse) / (platform.machine + ("" if recipe.python == SANDBOX.python else f"-{recipe.abi}"))


def _target(platform: Platform, recipe: Recipe) -> list[str]:
    """pip's arguments that select wheels for the image's Python on ``platform``."""
    return ["--only-binary=:all:", "--python-version", recipe.python, "--implementation", "cp",
            "--abi", recipe.abi] + [arg for tag in platform.pip_platforms for arg in ("--platform", tag)]


def recipe_digest(requirements: Path | None = None, recipe: Recipe = SANDBOX) -> str:
    """A short hash of the image recipe (the Dockerfile and the requirements): images built
    by :func:`build_image` carry it as the :data:`RECIPE_LABEL` label, so an image built from
    an older recipe can be told apart and rebuilt.

    Args:
        requirements: A requirements file; default: the image's ``requirements.txt``.

    Returns:
        16 hex digits.
    """
    digest = hashlib.sha256(recipe.dockerfile.read_bytes())
    digest.update(b"\0")
    digest.update(Path(requirements).read_bytes() if requirements else recipe.requirements.read_bytes())
    return digest.hexdigest()[:16]


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)


def wheelhouse_is_complete(wheelhouse: Path, requirements: Path | None = None, *, platform: Platform, recipe: Recipe = SANDBOX) -> bool:
    """Tell whether ``wheelhouse`` alone satisfies ``requirements`` for the image's Python.

    Resolves offline with ``pip install --dry-run --no-index`` for CPython 3.11 on ``platform``'s
    manylinux; ``--isolated`` keeps find-links from pip configuration out of the answer.

    Args:
        wheelhouse: The wheelhouse; its :func:`wheelhouse_for` ``platform`` folder is read.
        requirements: A requirements file; default: the image's ``requirements.txt``.
        platform: The image's architecture.

    Returns:
        True when every requirement and dependency has a wheel there.
    """
    folder = wheelhouse_for(wheelhouse, platform, recipe)
    if not folder.is_dir():
        return False
    with resources.as_file(recipe.requirements) as default, tempfile.TemporaryDirectory() as target:
        result = _pip("install", "--isolated", "--dry-run", "--quiet", "--no-index",
                      "--find-links", str(folder), "--target", target, *_target(platform, recipe),
                      "-r", str(requirements or default))
    return result.returncode == 0


def needed_wheels(wheelhouse: Path, requirements: Path | None = None, *, platform: Platform, recipe: Recipe = SANDBOX) -> list[Path]:
    """The wheels of ``wheelhouse`` (its ``platform`` folder) that ``requirements`` and their
    dependencies need for the image's Python (CPython 3.11 on ``platform``'s manylinux): pip
    resolves offline (``install --dry-run --no-index --report``), so a wheelhouse shared by
    several images sends each build only its own.

    Raises:
        ImageBuildError: the wheelhouse does not satisfy ``requirements`` (pip's output as log tail).
    """
    folder = wheelhouse_for(wheelhouse, platform, recipe)
    with resources.as_file(recipe.requirements) as default, tempfile.TemporaryDirectory() as target:
        result = _pip("install", "--isolated", "--dry-run", "--quiet", "--no-index", "--find-links", str(folder),
                      "--target", target, *_target(platform, recipe), "--report", "-", "-r", str(requirements or default))
    if result.returncode != 0:
        raise ImageBuildError(f"the wheelhouse {folder} does not satisfy the requirements",
                              result.stderr.splitlines()[-LOG_TAIL_LINES:])
    urls = [item["download_info"]["url"] for item in json.loads(result.stdout)["install"]]
    return [Path(urllib.parse.unquote(urllib.parse.urlparse(url).path)) for url in urls]


def download_wheelhouse(dest: Path, requirements: Path | None = None, *, platform: Platform, recipe: Recipe = SANDBOX) -> Path:
    """Download the wheels of the image's Python packages into ``dest``'s ``platform`` folder
    (:func:`wheelhouse_for`), unless already there.

    Runs ``pip download`` on the host with the host's pip configuration (index, certificates),
    asking for binary wheels for CPython 3.11 on ``platform``'s manylinux (glibc <= 2.36, Debian
    bookworm), whatever the host is. Skips the download when :func:`wheelhouse_is_complete`.
    Copy ``dest`` to an air-gapped machine to build the image there.

    Args:
        dest: Wheelhouse directory; it and the platform's folder are created if missing.
        requirements: A requirements file; default: the image's ``requirements.txt``.
        platform: The image's architecture.

    Returns:
        ``dest`` (not the platform's folder).

    Raises:
        ImageBuildError: pip could not download a wheel for some requirement; the log tail is
            pip's output.
    """
    folder = wheelhouse_for(dest, platform, recipe)
    folder.mkdir(parents=True, exist_ok=True)
    if wheelhouse_is_complete(dest, requirements, platform=platform, recipe=recipe):
        return dest
    with resources.as_file(recipe.requirements) as default:
        result = _pip("download", "--quiet", "--disable-pip-version-check", "--dest", str(folder),
                      *_target(platform, recipe), "-r", str(requirements or default))
    if result.returncode != 0:
        lines = (result.stdout + result.stderr).splitlines()
        raise ImageBuildError(
            f"pip download into {folder} failed (exit {result.returncode}): the package index must "
            "be reachable from this machine, or copy a complete wheelhouse there",
            [line for line in lines if not line.startswith("WARNING: Location")][-LOG_TAIL_LINES:],
        )
    return dest


def _build_context(wheelhouse: Path, requirements: Path | None, platform: Platform, recipe: Recipe) -> IO[bytes]:
    """Write the build context (Dockerfile, requirements.txt, wheels/) to a temporary tar."""
    context = tempfile.TemporaryFile()
    with tarfile.open(fileobj=context, mode="w") as tar:
        with resources.as_file(recipe.dockerfile) as dockerfile:
            tar.add(str(dockerfile), arcname="Dockerfile")
        with resources.as_file(recipe.requirements) as default:
            tar.add(str(requirements or default), arcname="requirements.txt")
        wheels_dir = tarfile.TarInfo("wheels")
        wheels_dir.type, wheels_dir.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(wheels_dir)
        for wheel in sorted(needed_wheels(wheelhouse, requirements, platform=platform, recipe=recipe)):
            tar.add(str(wheel), arcname=f"wheels/{wheel.name}")
    context.seek(0)
    return context


def build_image(
    client: docker.DockerClient,
    *,
    base: str = DEFAULT_BASE,
    tag: str = DEFAULT_TAG,
    wheelhouse: Path | None = None,
    requirements: Path | None = None,
    progress: Callable[[str], None] | None = None,
    platform: Platform | None = None,
    recipe: Recipe = SANDBOX,
) -> str:
    """Build the default sandbox image (``Dockerfile`` in this package) and tag it.

    Uses the engine's classic builder through ``client.api.build`` (no BuildKit needed), with
    ``BASE`` as build argument; the image is labelled with :func:`recipe_digest` and ``base``
    (:data:`RECIPE_LABEL`, :data:`BASE_LABEL`). ``base`` must
    be present locally when no registry is reachable (make it with ``make-base-image.sh``).
    Measured here (2 cores): 40-60 s including the wheel download, image 545 MB. For another
    architecture than the engine's (``linux/arm64`` on x86_64 under qemu-user-static), ``base``
    must be an image of that architecture.

    Args:
        client: A docker-py client, e.g. ``docker.from_env()``.
        base: Base image with python3 3.11 and its venv module.
        tag: Name given to the built image.
        wheelhouse: Wheel directory; made or completed with :func:`download_wheelhouse` (which
            needs the package index). None: download into a temporary directory.
        requirements: A requirements file; default: the image's ``requirements.txt``.
        progress: Called with each build log line (without the newline) as the engine sends it.
        platform: The image's architecture; None: the engine's (:func:`engine_platform`).
        recipe: What to build (:data:`SANDBOX`, or the egress proxy's).

    Returns:
        The image id (``sha256:...``). The image ``tag`` named before, if any, is removed when
        no container or other tag uses it.

    Raises:
        ImageBuildError: The engine's architecture is not supported (without ``platform``), the
            local ``base`` is for another architecture, the wheels could not be downloaded, or
            the engine refused or failed the build; carries the last build log lines.
        SandboxError: the engine failed otherwise (mapped by :func:`~..boundary.engine_errors`).
    """
    platform = platform or engine_platform(client)
    base_is_local = local_image(client, base) is not None  # else the engine will try to pull it
    if base_is_local and (base_platform := image_platform(client, base)) != platform:
        raise ImageBuildError(f"the base image {base} is for {base_platform}, not {platform}: give a base of that "
                              "architecture (make-base-image.sh TAG '' ARCH makes one from Debian packages)")
    previous = (local_image(client, tag) or {}).get("Id")
    with tempfile.TemporaryDirectory() as scratch:
        wheels = download_wheelhouse(wheelhouse or Path(scratch), requirements, platform=platform, recipe=recipe)
        try:
            with _build_context(wheels, requirements, platform, recipe) as context:
                image_id = run_build(client, context, tag, buildargs={"BASE": base}, progress=progress,
                                     labels={RECIPE_LABEL: recipe_digest(requirements, recipe), BASE_LABEL: base},
                                     platform=platform)
        except ImageBuildError as exc:
            if exc.engine_error is None:
                raise
            hint = ""
            if not base_is_local:
                hint = (f" (the base image {base!r} is not present locally; without a registry, make"
                        " it with sandbox_kernel/backends/docker/images/make-base-image.sh)")
            raise ImageBuildError(f"building {tag} from {base} failed: {exc.engine_error}{hint}",
                                  exc.log_tail) from exc
    if previous not in (None, image_id):  # a rebuild: drop the replaced image unless still in use
        remove_image_if_unused(client, previous)
    return image_id


def run_build(client: docker.DockerClient, context: IO[bytes] | None, tag: str, *, buildargs: dict[str, str],
              labels: dict[str, str], progress: Callable[[str], None] | None = None,
              path: str | None = None, dockerfile: str | None = None, platform: Platform | None = None) -> str:
    """Build ``tag`` with the engine's classic builder (``POST /build`` through
    ``client.api.build``; no BuildKit needed), from the uncompressed tar ``context`` or from the
    folder ``path`` (docker-py sends it, minus its ``.dockerignore``) and its ``dockerfile``.

    Args:
        progress: Called with each build log line (without the newline) as the engine sends it.
        platform: Build for this architecture (the engine's ``platform`` parameter); None: the
            engine's own.

    Returns:
        The image id (``sha256:...``).

    Raises:
        ImageBuildError: the engine refused or failed the build; ``engine_error`` holds the
            engine's own error when it failed a step; carries the last build log lines.
    """
    tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)
    source = {"path": path, "dockerfile": dockerfile} if path else {"fileobj": context, "custom_context": True,
                                                                     "encoding": None}
    if platform is not None:
        source["platform"] = platform.docker
    try:
        with engine_errors(f"build {tag}"):
            chunks = client.api.build(**source, tag=tag, buildargs=buildargs, labels=labels, rm=True, forcerm=True,
                                      decode=True)
            error = _follow(chunks, tail, progress)
    except Refused as exc:
        raise ImageBuildError(f"the Docker engine refused to build {tag}: {exc.explanation}", tail) from exc
    if error is not None:
        failure = ImageBuildError(f"building {tag} failed: {error}", tail)
        failure.engine_error = error
        raise failure
    with engine_errors(f"inspect the image {tag}"):
        return client.api.inspect_image(tag)["Id"]


def _follow(chunks: Iterable[dict], tail: collections.deque[str],
            progress: Callable[[str], None] | None) -> str | None:
    """Pass build log lines to ``progress`` and ``tail``; return the engine's error, if any."""
    pending, error = "", None
    for chunk in chunks:
        if "error" in chunk:
            error = str(chunk.get("errorDetail", {}).get("message") or chunk["error"]).strip()
            break
        text = _ANSI.sub("", chunk.get("stream") or chunk.get("status") or "")
        *lines, pending = (pending + text).split("\n")
        for line in lines:
            _emit(line, tail, progress)
    if pending:
        _emit(pending, tail, progress)
    return error


def _emit(line: str, tail: collections.deque[str], progress: Callable[[str], None] | None) -> None:
    tail.append(line)
    if progress is not None:
        progress(line)


def image_is_current(client: docker.DockerClient, tag: str = DEFAULT_TAG,
                     requirements: Path | None = None, recipe: Recipe = SANDBOX) -> bool | None:
    """Tell whether ``tag`` was built from this package's recipe (its :data:`RECIPE_LABEL`
    equals :func:`recipe_digest`).

    Returns:
        None when ``tag`` is not present locally; False when it was built from another recipe
        (or by hand, without the label); True otherwise.

    Raises:
        SandboxError: the engine failed (mapped by :func:`~..boundary.engine_errors`).
    """
    inspected = local_image(client, tag)
    if inspected is None:
        return None
    return (inspected["Config"].get("Labels") or {}).get(RECIPE_LABEL) == recipe_digest(requirements, recipe)


def image_has_ipykernel(client: docker.DockerClient, image: str, timeout: float = 60.0) -> bool:
    """Tell whether ``python -c "import ipykernel"`` succeeds in a throw-away container.

    The container runs with the image's user, no network and its entrypoint replaced, and is
    removed afterwards. Measured here: 0.2-0.4 s. An image without a ``python`` executable on its
    PATH (such as the Debian base image, which only has ``python3``) is reported False: the
    sandbox backends start the kernel with ``python -m ipykernel_launcher``.

    Args:
        client: A docker-py client.
        image: Image name or id; must be present locally (never pulled).
        timeout: Seconds to wait for the import.

    Returns:
        True when the import exits 0 within ``timeout``.

    Raises:
        Missing: ``image`` is not present locally.
        SandboxError: the engine failed otherwise (mapped by :func:`~..boundary.engine_errors`).
    """
    with engine_errors(f"inspect the image {image}"):
        client.images.get(image)  # raises instead of pulling
        container = client.containers.create(
            image, entrypoint=["python", "-c", "import ipykernel"], command=[],
            network_mode="none", detach=True,
        )
    try:
        try:
            with engine_errors(f"start a container of {image}"):
                container.start()
        except Refused as exc:
            if "executable file not found" in exc.explanation or "no such file" in exc.explanation.lower():
                return False
            raise
        status = wait_exited(container, timeout)
        # None: an image whose import takes longer cannot start a kernel usefully
        return status is not None and status.get("StatusCode") == 0
    finally:
        with engine_errors(f"remove the container of {image}"):
            container.remove(force=True)

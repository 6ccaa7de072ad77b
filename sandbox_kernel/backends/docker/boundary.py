"""The docker backend's boundary with docker-py: the one module of the backend that imports
docker-py and catches its exceptions (and those of ``requests`` under it), mapping each to the
:class:`~sandbox_kernel.errors.SandboxError` tree with what to do about it.

Code that talks to the engine runs in :func:`engine_errors`; a caller that treats one answer
as normal catches the mapped error: :class:`Missing` (404: gone already, no such file or
image), :class:`Refused` (any other refusal; ``status_code`` says which). docker-py is imported
lazily (:func:`load_docker`): importing this module never needs it.
Engine API: https://docs.docker.com/engine/api/v1.41/
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from ...errors import BackendUnavailable, SandboxError, SandboxStartError

INSTALL_FIX = "pip install 'sandbox-kernel[docker]'"
ENGINE_FIX = ("start the Docker engine (`sudo systemctl start docker`, or `sudo dockerd &`), "
              "or point DOCKER_HOST at one")
PERMISSION_FIX = "add your user to the 'docker' group (`sudo usermod -aG docker $USER`, then log in again)"


class EngineLost(SandboxError):
    """The engine stopped answering while a container was in use."""


class Refused(SandboxStartError):
    """The engine answered a request with an error (docker-py's ``APIError``).

    Attributes:
        status_code: the HTTP status of the engine's answer (409: in use, 500: ...), or None.
        explanation: the engine's own message.
    """

    def __init__(self, message: str, status_code: int | None, explanation: str) -> None:
        super().__init__(message)
        self.status_code, self.explanation = status_code, explanation


class Missing(Refused):
    """The engine has no such container, volume, image or file (HTTP 404)."""


def load_docker() -> Any:
    """The ``docker`` module (docker-py).

    Raises:
        BackendUnavailable: docker-py is not installed (the fix is the pip command).
    """
    try:
        import docker.errors

        import docker
    except ImportError as exc:
        raise BackendUnavailable("The docker backend needs the Python package 'docker' (docker-py), "
                                 "which is not installed.", fix=INSTALL_FIX) from exc
    return docker


def host() -> str:
    """The engine's address as the environment names it."""
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


@contextlib.contextmanager
def engine_errors(doing: str) -> Iterator[None]:
    """Map docker-py and transport errors raised in the block to the SandboxError tree; a
    SandboxError raised in the block (also by a nested ``engine_errors``) passes unchanged.

    Args:
        doing: what the block does, for the message ("create the sandbox container").

    Raises:
        Missing: no such image ("Could not DOING: ...") or other object ("The Docker engine
            refused to DOING: ...").
        Refused: the engine refused the request (a bad option, a conflict).
        SandboxStartError: a one-off container failed ("Could not DOING: its last stderr line").
        BackendUnavailable: no engine answers, or no permission to use its socket.
    """
    docker = load_docker()
    import requests.exceptions

    try:
        yield
    except SandboxError:
        raise
    except docker.errors.APIError as exc:
        raise _refusal(docker, exc, doing) from exc
    except docker.errors.ContainerError as exc:
        stderr = (exc.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        raise SandboxStartError(f"Could not {doing}: {stderr[-1] if stderr else exc}") from exc
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        if isinstance(exc, PermissionError) or "Permission denied" in str(exc):
            raise BackendUnavailable(f"No permission to use the Docker engine's socket ({host()}).",
                                     fix=PERMISSION_FIX) from exc
        raise BackendUnavailable(f"The Docker engine is not answering at {host()}.", fix=ENGINE_FIX) from exc


def _refusal(docker: Any, exc: Any, doing: str) -> Refused:
    explanation = str(exc.explanation or exc)
    if isinstance(exc, docker.errors.ImageNotFound):
        return Missing(f"Could not {doing}: {exc.explanation}.", exc.status_code, explanation)
    kind = Missing if isinstance(exc, docker.errors.NotFound) else Refused
    return kind(f"The Docker engine refused to {doing}: {explanation}.", exc.status_code, explanation)


def stats(container: Any) -> dict[str, Any]:
    """The engine's one-shot stats of ``container`` (``GET /containers/{id}/stats``: ``memory_stats``,
    ``pids_stats``, ...). Blocking.

    Raises:
        SandboxError: the container or the engine is gone (mapped by :func:`engine_errors`).
    """
    with engine_errors("read the sandbox's resource use"):
        return container.stats(stream=False, one_shot=True)

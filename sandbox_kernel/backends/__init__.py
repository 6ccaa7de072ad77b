"""Backends, found by name through the entry-point group ``sandbox_kernel.backends``.

Loading is lazy: ``import sandbox_kernel`` never imports docker-py or the E2B SDK. A third
party registers its own backend with an entry point in its ``pyproject.toml``::

    [project.entry-points."sandbox_kernel.backends"]
    mine = "my_package.backend:MyBackend"
"""

from __future__ import annotations

from importlib.metadata import entry_points

from ..errors import BackendUnavailable, ConfigError
from .base import Backend

GROUP = "sandbox_kernel.backends"

# The extra that provides each built-in backend's optional dependency.
_EXTRAS = {"docker": "docker", "e2b": "e2b", "gateway": "gateway"}


def backend_names() -> list[str]:
    """Names of every registered backend, sorted."""
    return sorted({ep.name for ep in entry_points(group=GROUP)})


def get_backend_class(name: str) -> type[Backend]:
    """The backend class registered as ``name``.

    Raises:
        ConfigError: no backend has that name (the message lists the known ones).
        BackendUnavailable: the backend's optional dependency is not installed.
    """
    matches = [ep for ep in entry_points(group=GROUP) if ep.name == name]
    if not matches:
        known = ", ".join(backend_names()) or "none (is sandbox-kernel installed?)"
        raise ConfigError(f"Unknown sandbox backend {name!r}. Known backends: {known}.")
    try:
        cls = matches[0].load()
    except ImportError as exc:
        extra = _EXTRAS.get(name, name)
        raise BackendUnavailable(
            f"The {name} backend needs the Python package {exc.name!r}, which is not installed.",
            fix=f"pip install 'sandbox-kernel[{extra}]'",
        ) from exc
    return cls


__all__ = ["Backend", "GROUP", "backend_names", "get_backend_class"]

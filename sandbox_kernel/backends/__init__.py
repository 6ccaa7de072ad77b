"""Backends, found by name through the entry-point group ``sandbox_kernel.backends``.

Loading is lazy: ``import sandbox_kernel`` never imports docker-py or the E2B SDK. A third
party registers its own backend with an entry point in its ``pyproject.toml``::

    [project.entry-points."sandbox_kernel.backends"]
    mine = "my_package.backend:MyBackend"

The group is read once per process (:func:`registered`): a backend installed later is found by
the next process. A built-in backend is found in this package's own metadata without reading the
group (:func:`get_backend_class`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from importlib import metadata
from importlib.metadata import entry_points
from typing import Any

from traitlets import TraitError
from traitlets.config import Configurable

from ..core.errors import BackendUnavailable, BadValue, ConfigError
from ..runtime import lock
from .base import Backend

GROUP = "sandbox_kernel.backends"

# The extra that provides each built-in backend's optional dependency.
_EXTRAS = {"docker": "docker", "e2b": "e2b", "gateway": "gateway"}


TEST_DOUBLES = frozenset({"scripted"})
"""Registered backends that run no code (:mod:`.scripted`): no kernelspec is written for them."""


@functools.cache
def registered() -> dict[str, metadata.EntryPoint]:
    """The group's entry points by backend name (the first of a name), read once: reading them
    opens every installed distribution's metadata (about 50 ms here, and 30 kB of reference
    cycles of importlib.metadata's for the collector), which each sandbox and each ``%%sandbox``
    session paid when it looked its backend up."""
    found: dict[str, metadata.EntryPoint] = {}
    for ep in entry_points(group=GROUP):
        found.setdefault(ep.name, ep)
    return found


def backend_names() -> list[str]:
    """Names of every registered backend, sorted."""
    return sorted(registered())


def kernelspec_backends() -> list[str]:
    """The registered backends a kernelspec is written for by default (all but test doubles)."""
    return [name for name in backend_names() if name not in TEST_DOUBLES]


@functools.cache
def built_in() -> dict[str, metadata.EntryPoint]:
    """The group's entry points of sandbox-kernel's own distribution, by name (empty when its
    metadata is not installed): read from that one distribution, 1.7 ms here, where the whole
    group (:func:`registered`) opens every installed distribution's metadata, 31 ms of each
    kernel's start."""
    try:
        entries = metadata.distribution("sandbox-kernel").entry_points
    except metadata.PackageNotFoundError:
        return {}
    return {ep.name: ep for ep in entries if ep.group == GROUP}


def get_backend_class(name: str) -> type[Backend]:
    """The backend class registered as ``name``: a built-in one (:func:`built_in`) before any
    other distribution's of the same name.

    Raises:
        ConfigError: no backend has that name (the message lists the known ones).
        BackendUnavailable: the backend's optional dependency is not installed.
    """
    if (entry := built_in().get(name) or registered().get(name)) is None:
        known = ", ".join(backend_names()) or "none (is sandbox-kernel installed?)"
        raise ConfigError(f"Unknown sandbox backend {name!r}. Known backends: {known}.")
    try:
        cls = entry.load()
    except ImportError as exc:
        raise BackendUnavailable(
            f"The {name} backend needs the Python package {exc.name!r}, which is not installed.",
            fix=install_fix(name),
        ) from exc
    return cls


def missing_packages(name: str) -> list[str]:
    """The packages of backend ``name``'s extra (``sandbox-kernel[e2b]``) that are not installed;
    empty when it has none or sandbox-kernel's metadata is not installed (run from a source tree).
    Backends import their SDK lazily, so their class loads without it: this asks the metadata."""
    from packaging.requirements import Requirement  # ipykernel's dependency

    extra = _EXTRAS.get(name)
    if extra is None:
        return []
    try:
        requirements = metadata.requires("sandbox-kernel") or []
    except metadata.PackageNotFoundError:
        return []
    missing = []
    for requirement in map(Requirement, requirements):
        if requirement.marker is not None and requirement.marker.evaluate({"extra": extra}):
            try:
                metadata.version(requirement.name)
            except metadata.PackageNotFoundError:
                missing.append(requirement.name)
    return missing


def install_fix(name: str) -> str:
    """The pip command that installs backend ``name``'s optional dependencies."""
    return f"pip install 'sandbox-kernel[{_EXTRAS.get(name, name)}]'"


def make_backend(name: str, *, parent: Configurable, output_budget: tuple[int, str],
                 options: Callable[[type[Backend]], dict[str, Any]] = lambda cls: {},
                 completions: bool = False) -> Backend:
    """The backend ``name``, made the one way every front door (kernel, magic, API) makes it.

    Args:
        name: the registered backend's name ("docker").
        parent: the front door's configurable: its config (kernelspec argv, config files, the
            IPython profile) reaches the backend's traits.
        output_budget: ``(bytes, setting)``, the front door's output budget and the option that
            sets it (see :meth:`Backend.set_output_budget`).
        options: given the backend's class, checks the option names the front door was given
            (raising its own error, each unknown name with :func:`~sandbox_kernel.runtime.config_check.closest`)
            and returns the traits to make it with.
        completions: whether the front door answers a person's completion requests (the
            kernel): the sandbox then warms its completer as it starts (:attr:`Backend.warm_completion`).

    Returns:
        The backend, not started.

    Raises:
        ConfigError: no backend has that name, or ``options`` refused a name.
        BadValue: an option's value is refused (a ConfigError; ``detail`` for the front door's wording).
        BackendUnavailable: the backend's optional dependency is not installed.
        Locked: the backend, or an option's value, is beyond the administrator's lock
            (:mod:`sandbox_kernel.runtime.lock`); one message names each.
    """
    cls = get_backend_class(name)
    traits = options(cls)
    try:
        backend = cls(parent=parent, **traits)
    except (TraitError, ValueError) as exc:
        raise BadValue(name, str(exc)) from exc
    lock.load().check_backend(name, backend)
    # Its config is read: the backend keeps the parent's logger, not the parent, a door that holds
    # the backend (through its session). door -> session -> backend -> door was a cycle, so a
    # closed session's objects waited for a full collection (issue 37).
    backend.log = backend.log
    backend.parent = None
    backend.set_output_budget(*output_budget)
    backend.warm_completion = completions
    return backend


__all__ = ["GROUP", "TEST_DOUBLES", "Backend", "BadValue", "backend_names", "get_backend_class", "install_fix",
           "kernelspec_backends", "make_backend", "missing_packages"]

"""Option names that no class takes: traitlets only logs a warning for them (and not at all for
a section no class reads), so ``--DockerBackend.memory_limt=2g`` would be silently ignored.

The one check of option names for every door: :func:`option_names` says which names a class
takes, :func:`unknown_names` finds the others with the closest known name (:mod:`difflib`). Each
door words the finding as its user spelt the option: :func:`unknown_options` for config (the
kernel's argv and config files, the magic's IPython config), the magic's line
(:func:`sandbox_kernel.frontdoors.magics.options.backend_traits`), the API's keyword arguments and
config (:class:`sandbox_kernel.frontdoors.api.AsyncSandbox`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import entry_points

from traitlets.config import Config, Configurable


def _subclasses(cls: type) -> set[type]:
    found, todo = {cls}, [cls]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def _loaded_classes() -> dict[str, list[type]]:
    """Every Configurable class imported in this process, by name."""
    by_name: dict[str, list[type]] = {}
    for cls in _subclasses(Configurable):
        by_name.setdefault(cls.__name__, []).append(cls)
    return by_name


def backend_class_names() -> set[str]:
    """Class names of every registered backend (entry points ``sandbox_kernel.backends``), read
    from the entry points without importing them: config for a backend not in use is no typo."""
    return {ep.value.rpartition(":")[2] for ep in entry_points(group="sandbox_kernel.backends")}


def option_names(cls: type[Configurable], *, subclasses: bool = False) -> set[str]:
    """The names of ``cls``'s configurable traits: the options it takes as keyword arguments; with
    ``subclasses``, those a config section named after it may set (traitlets applies a section to
    its class and every subclass: ``c.Backend.memory_limit`` reaches DockerBackend's)."""
    return {name for sub in (_subclasses(cls) if subclasses else {cls}) for name in sub.class_traits(config=True)}


def _names(section: str, classes: list[type]) -> set[str]:
    return {name for cls in classes for name in option_names(cls, subclasses=True)}


def closest(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The known name nearest to the misspelt ``word`` (:mod:`difflib`), or None when none is
    near: how every front door suggests an option name (``memory_limt`` → ``memory_limit``)."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=cutoff)
    return close[0] if close else None


@dataclass(frozen=True)
class Unknown:
    """A name no option has, and the closest one that does (None when none is near)."""

    name: str
    closest: str | None


def unknown_names(given: Iterable[str], known: Iterable[str]) -> list[Unknown]:
    """Each of ``given`` that is not in ``known``, in order, with the closest known name."""
    known = set(known)
    return [Unknown(name, closest(name, known)) for name in given if name not in known]


def _ours(classes: list[type]) -> dict[str, list[type]]:
    """The sections whose names are checked: the given classes and their ancestors of this
    package (``Backend``, ``KernelClientBackend``, ``OutputOptions``), by name."""
    ours: dict[str, list[type]] = {}
    for cls in classes:
        for base in cls.__mro__:
            if base is cls or base.__module__.split(".")[0] == __name__.split(".")[0]:
                ours.setdefault(base.__name__, []).append(base)
    return ours


def unknown_options(config: Config, classes: Iterable[type[Configurable]], sections: Iterable[str] | None = None,
                    prefix: str = "--") -> list[str]:
    """One message per option in ``config`` that no class takes, each with the closest known name.

    Only sandbox-kernel's own sections are judged: config files are shared with other programs
    (the kernel also reads the IPython profile's ``ipython_config.py``, full of
    ``TerminalInteractiveShell`` options), so a section that names no imported class is reported
    only when it is a near miss of one of ours (``DockerBakend``), and options of other classes
    are left to traitlets' warning.

    Args:
        config: the traitlets config (``self.config`` of a configurable: argv and config files).
        classes: the classes whose options must be spelled right (``SandboxKernel``,
            ``DockerBackend``); their ancestors in this package are checked too. Registered
            backends that are not imported are known by name, their options unchecked.
        sections: the sections of ``config`` to look at; None: all of them.
        prefix: put before ``Class.name`` in the messages (``--`` as on a kernelspec's argv).

    Returns:
        Messages such as ``"unknown option --DockerBackend.memory_limt; did you mean
        --DockerBackend.memory_limit?"``; empty when every name is known.
    """
    ours = _ours(list(classes))
    loaded = _loaded_classes()
    backends: set[str] | None = None  # read from the entry points only for a section no loaded class has (10 ms)
    messages = []
    for section in sorted(config) if sections is None else [s for s in sections if s in config]:
        value = config[section]
        if not isinstance(value, Config) or not section[:1].isupper():  # not a Class section
            continue
        if section in ours:
            for unknown in unknown_names(value, _names(section, ours[section] + loaded.get(section, []))):
                messages.append(f"unknown option {prefix}{section}.{unknown.name}" + (
                    f"; did you mean {prefix}{section}.{unknown.closest}?" if unknown.closest else ""))
        elif section not in loaded and section not in (backends := backend_class_names() if backends is None else backends):
            if close := closest(section, {*ours, *backends}, cutoff=0.8):
                names = ", ".join(f"{prefix}{section}.{key}" for key in value)
                messages.append(f"unknown option {names}: no class is named {section}; did you mean {close}?")
    return messages

"""Option names that no class takes: traitlets only logs a warning for them (and not at all for
a section no class reads), so ``--DockerBackend.memory_limt=2g`` would be silently ignored.

:func:`unknown_options` names each one with the closest known name (:mod:`difflib`), so the
kernel and the magic can report it the way they report a bad value.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
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


def _names(section: str, classes: list[type]) -> set[str]:
    """Option names a ``section`` may set: traitlets applies a section to its class and every
    subclass (``c.Backend.memory_limit`` reaches DockerBackend's), so the subclasses' count."""
    return {name for cls in classes for sub in _subclasses(cls) for name in sub.class_traits(config=True)}


def closest(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The known name nearest to the misspelt ``word`` (:mod:`difflib`), or None when none is
    near: how every front door suggests an option name (``memory_limt`` → ``memory_limit``)."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=cutoff)
    return close[0] if close else None


def _suggest(word: str, choices: Iterable[str]) -> str:
    close = closest(word, choices)
    return f"; did you mean {close}?" if close else ""


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
    backends = backend_class_names()
    messages = []
    for section in sorted(config) if sections is None else [s for s in sections if s in config]:
        value = config[section]
        if not isinstance(value, Config) or not section[:1].isupper():  # not a Class section
            continue
        if section in ours:
            known = _names(section, ours[section] + loaded.get(section, []))
            for key in value:
                if key not in known:
                    hint = _suggest(key, known)
                    messages.append(f"unknown option {prefix}{section}.{key}" +
                                    hint.replace("mean ", f"mean {prefix}{section}."))
        elif section not in loaded and section not in backends:
            if close := closest(section, {*ours, *backends}, cutoff=0.8):
                names = ", ".join(f"{prefix}{section}.{key}" for key in value)
                messages.append(f"unknown option {names}: no class is named {section}; did you mean {close}?")
    return messages

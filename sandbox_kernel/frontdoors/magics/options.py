"""Parsing the magic's lines; backend options become traits of the backend class.

``%%sandbox --backend local --name etl --timeout 30 --memory-limit 1g --env-vars HOME``:
``--backend``/``--name``/``--timeout`` are the magic's own; every other ``--some-option VALUE``
(or ``--some-option=VALUE``) sets the backend class's configurable trait ``some_option``,
converted from text the way traitlets converts command-line config
(``--LocalBackend.memory_limit=1g`` on a kernel's argv). Bad input raises IPython's
``UsageError`` with a one-line message.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from IPython.core.error import UsageError
from traitlets import Container, Dict, TraitError

from sandbox_kernel.backends.base import Backend
from sandbox_kernel.policy import POLICIES
from sandbox_kernel.runtime import config_check
from sandbox_kernel.session import verbs
from sandbox_kernel.session.verbs import MAGIC

CELL_USAGE = ("%%sandbox [--backend NAME] [--name SESSION] [--timeout SECONDS] [--output-policy sanitize|isolate|trust] "
              "[-i NAME[,NAME...] ...] [-o NAME[,NAME...] ...] [--backend-option VALUE ...]")
LINE_USAGE = verbs.usage(MAGIC)
"""The ``%sandbox`` line magic's usage, from the table every door uses (:mod:`sandbox_kernel.session.verbs`)."""

_OWN = {"--backend": "backend", "-b": "backend", "--name": "name", "-n": "name", "--timeout": "timeout",
        "-t": "timeout", "--output-policy": "output_policy"}


def usage(message: str, usage_line: str) -> UsageError:
    return UsageError(f"{message}. Usage: {usage_line}")


def split(line: str, usage_line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as exc:
        raise usage(f"cannot parse the line ({exc})", usage_line) from None


def _split(tokens: list[str], flags: dict[str, str], usage_line: str, needs: str) -> tuple[list[tuple[str, str]], list[str]]:
    """``[(flag, value), ...]`` for the tokens that are one of ``flags`` (each takes a value, as
    ``--flag VALUE`` or ``--flag=VALUE``; ``needs`` names it in the error), and the rest, in order."""
    pairs: list[tuple[str, str]] = []
    rest: list[str] = []
    i = 0
    while i < len(tokens):
        flag, sep, value = tokens[i].partition("=")
        if flag in flags:
            if not sep:
                if i + 1 >= len(tokens):
                    raise usage(f"{flag} needs {needs}", usage_line)
                i, value = i + 1, tokens[i + 1]
            pairs.append((flag, value))
        else:
            rest.append(tokens[i])
        i += 1
    return pairs, rest


def take_options(tokens: list[str], own: dict[str, str], usage_line: str) -> tuple[dict[str, str], list[str]]:
    """Split ``tokens`` into the options named in ``own`` (``{flag: key}``; each takes a value,
    as ``--flag VALUE`` or ``--flag=VALUE``) and the rest, in order."""
    pairs, rest = _split(tokens, own, usage_line, "a value")
    return {own[flag]: value for flag, value in pairs}, rest


@dataclass
class CellArgs:
    """The parsed ``%%sandbox`` line."""

    name: str = "default"
    backend: str | None = None
    timeout: float | None = None
    output_policy: str | None = None
    """This cell's output policy (``--output-policy``), or None for the magic's default."""
    options: list[str] = field(default_factory=list)
    """The backend options, as tokens (``["--memory-limit", "1g"]``)."""
    inputs: list[str] = field(default_factory=list)
    """Host variables copied into the sandbox before the cell (``-i``)."""
    outputs: list[str] = field(default_factory=list)
    """Sandbox variables copied back to the host after the cell succeeded (``-o``)."""


_NAMES = {"-i": "inputs", "--input": "inputs", "-o": "outputs", "--output": "outputs"}


def take_names(tokens: list[str], usage_line: str) -> tuple[dict[str, list[str]], list[str]]:
    """Split the repeatable ``-i``/``-o`` options (comma lists too) from ``tokens``."""
    pairs, rest = _split(tokens, _NAMES, usage_line, "a variable name")
    found: dict[str, list[str]] = {"inputs": [], "outputs": []}
    for flag, value in pairs:
        found[_NAMES[flag]] += [n.strip() for n in value.split(",") if n.strip()]
    return found, rest


def parse_cell_line(line: str) -> CellArgs:
    """Parse the ``%%sandbox`` line (see the module's docstring)."""
    names, tokens = take_names(split(line, CELL_USAGE), CELL_USAGE)
    found, rest = take_options(tokens, _OWN, CELL_USAGE)
    args = CellArgs(name=found.get("name", "default"), backend=found.get("backend"),
                    output_policy=found.get("output_policy"), options=rest, **names)
    if args.output_policy is not None and args.output_policy.lower() not in POLICIES:
        raise usage(f"--output-policy is one of {', '.join(POLICIES)}, not {args.output_policy!r}", CELL_USAGE)
    if not args.name:
        raise usage("--name needs a session name", CELL_USAGE)
    if "timeout" in found:
        try:
            args.timeout = float(found["timeout"])
        except ValueError:
            args.timeout = -1
        if not args.timeout > 0:
            raise usage(f"--timeout needs a positive number of seconds, not {found['timeout']!r}", CELL_USAGE)
    if rest and not rest[0].startswith("--"):
        raise usage(f"unexpected argument {rest[0]!r}", CELL_USAGE)
    return args


# Friendlier spellings of backend options: ``--attach ID`` is ``--sandbox-id ID`` (e2b).
ALIASES = {"attach": "sandbox_id"}


def option_names(cls: type[Backend]) -> list[str]:
    """The ``--options`` the backend class accepts on the magic's line: its options
    (:func:`~sandbox_kernel.runtime.config_check.option_names`) but the session's name, which the
    magic sets, and secrets, which the notebook would keep."""
    traits = cls.class_traits(config=True)
    return sorted(f"--{name.replace('_', '-')}" for name in config_check.option_names(cls)
                  if name != "session" and not traits[name].metadata.get("secret"))


def backend_traits(cls: type[Backend], tokens: list[str]) -> dict[str, Any]:
    """``["--memory-limit", "1g"]`` → ``{"memory_limit": 1073741824}``, for ``cls(**traits)``.

    Raises:
        UsageError: an option ``cls`` does not have, a missing value, or a bad value.
    """
    traits = cls.class_traits(config=True)
    strings: dict[str, list[str]] = {}
    i = 0
    while i < len(tokens):
        if not tokens[i].startswith("--"):
            raise usage(f"unexpected argument {tokens[i]!r}", CELL_USAGE)
        key, sep, value = tokens[i][2:].partition("=")
        name = key.replace("-", "_")
        if ALIASES.get(name) in traits:
            name = ALIASES[name]
        if name not in traits or name == "session":
            [unknown] = config_check.unknown_names([f"--{key.replace('_', '-')}"], option_names(cls))
            hint = f"did you mean {unknown.closest}?" if unknown.closest else \
                f"its options: {', '.join(option_names(cls)) or 'none'}"
            raise usage(f"unknown option --{key} for the {cls.name} backend ({hint})", CELL_USAGE)
        if traits[name].metadata.get("secret"):  # the line is saved in the notebook
            raise usage(f"--{key} is a secret and the cell's text is saved in the notebook: set it in the kernel's "
                        f"environment or config instead (see the {cls.name} backend's docs)", CELL_USAGE)
        if not sep:
            if i + 1 >= len(tokens) or tokens[i + 1].startswith("--"):
                raise usage(f"--{key} needs a value", CELL_USAGE)
            i, value = i + 1, tokens[i + 1]
        strings.setdefault(name, []).append(value)
        i += 1
    return {name: _convert(traits[name], name, values) for name, values in strings.items()}


def _convert(trait: Any, name: str, values: list[str]) -> Any:
    flag = f"--{name.replace('_', '-')}"
    try:
        if isinstance(trait, (Container, Dict)):  # repeated: --env-vars A --env-vars B
            return trait.from_string_list(values)
        if len(values) > 1:
            raise usage(f"{flag} is given more than once", CELL_USAGE)
        return trait.from_string(values[0])
    except (TraitError, ValueError, TypeError) as exc:
        raise usage(f"bad value for {flag}: {exc}", CELL_USAGE) from None

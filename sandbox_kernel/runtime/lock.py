"""The administrator's lock: settings fixed in a system location that no user's config file,
kernelspec, magic line or API call can loosen (a hub's sandbox kernels, a course's grader).

The lock is ``sandbox_kernel_lock.json`` in :data:`LOCK_DIRS` (``/etc/jupyter``,
``/usr/local/etc/jupyter``, and ``etc/jupyter`` of the Python environment that runs the kernel):
folders a user cannot write, found without any variable a user can set (Jupyter's own search path
follows ``JUPYTER_CONFIG_PATH`` and ``XDG_CONFIG_DIRS``). Every file found applies. Example::

    {
      "backends": ["docker"],
      "output_policy": "sanitize",
      "DockerBackend": {"network": "none", "mounts": [], "memory_limit": {"max": "2g"},
                        "env_vars": {"subset_of": ["LANG"]}, "allow_hosts": {"subset_of": ["pypi.org"]},
                        "host_secrets": []},
      "OutputOptions": {"allowed_origins": []},
      "per_user": {"sandboxes": 3, "memory": "4g"}
    }

- ``backends``: the backends a sandbox may use.
- ``output_policy``: the most permissive policy allowed (``sanitize`` < ``isolate`` < ``trust``).
- A class section (``DockerBackend``, ``LocalBackend``, ``Backend`` for all, ``OutputOptions``)
  locks options by name: a JSON value (the option must equal it; ``{}`` for an empty dict option
  such as ``envs``), ``{"max": N}`` (at most N, a number
  or a size such as ``"2g"``; for the options in :data:`ZERO_IS_UNLIMITED`, 0 is refused), ``{"one_of": [...]}`` or
  ``{"subset_of": [...]}`` (for a list option). A lock with an ``allow_hosts`` rule and none for
  ``pypi_index`` locks ``pypi_index`` to its default: the ``pypi`` preset reaches its host.
- ``per_user``: the most sandboxes one user may run at once (``sandboxes``) and their memory
  limits together (``memory``), enforced where a backend starts one (docker).

The lock is a closed world: a file that is not valid JSON, has a key this module does not
know, or a rule it cannot apply as written (``backends`` not a list of names, a ``max`` that is
neither a number nor a size, ``one_of``/``subset_of`` not a list, a ``per_user`` quota that does
not parse), refuses every sandbox until it is fixed. Checked by ``make_backend`` (backend options),
before an option of a made backend changes (``allow_hosts``: :meth:`Backend.check_lock
<sandbox_kernel.backends.base.Backend.check_lock>`) and where an output policy is built (policy
options): one message lists every locked option a user tried to loosen.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import Locked
from .config_check import backend_class_names
from .traits import format_bytes, parse_bytes

LOCK_NAME = "sandbox_kernel_lock.json"
LOCK_DIRS = (Path("/etc/jupyter"), Path("/usr/local/etc/jupyter"), Path(sys.prefix, "etc", "jupyter"))
"""Where lock files are read, in this order; never a user's folder."""

POLICY_ORDER = ("sanitize", "isolate", "trust")
ZERO_IS_UNLIMITED = frozenset({"memory_limit", "pids_limit", "cpus", "workdir_size", "tmp_size", "cpu_time_limit",
                               "max_processes", "max_output_bytes"})
"""Options whose 0 means "no limit": a ``max`` lock refuses it."""
_TOP = {"backends", "output_policy", "per_user"}
_PER_USER = {"sandboxes", "memory"}


@dataclass(frozen=True)
class Lock:
    """The merged lock files: ``files`` (where they are) and ``rules`` (``[(file, document)]``)."""

    rules: tuple[tuple[Path, dict[str, Any]], ...] = ()

    @property
    def files(self) -> list[str]:
        return [str(path) for path, _ in self.rules]

    def refuse(self, problems: list[str]) -> None:
        """Raise :class:`Locked` naming the lock files and every problem, if any."""
        if problems:
            raise Locked(f"Refused by the administrator's lock ({', '.join(self.files)}): {'; '.join(problems)}.")

    def check_backend(self, name: str, backend: Any, changes: dict[str, Any] | None = None) -> None:
        """Refuse backend ``name`` when the lock does not allow it, or any of its options beyond
        the lock (its class's section and its base classes' sections, e.g. ``Backend``).

        Args:
            changes: ``{option: value}`` about to be set on a made backend (``allow_hosts`` by
                ``set_allow_hosts``), checked in place of its current values before they apply.

        Raises:
            Locked: one message listing every refused option.
        """
        problems = []
        for _, document in self.rules:
            if "backends" in document and name not in document["backends"]:
                problems.append(f"the {name} backend is not allowed (allowed: {', '.join(document['backends'])})")
            for cls in type(backend).__mro__:
                problems += _check_section(cls.__name__, document.get(cls.__name__, {}), backend,
                                           exact=cls is type(backend), changes=changes or {})
        self.refuse(problems + self._preset_index(backend, changes or {}))

    def _preset_index(self, backend: Any, changes: dict[str, Any]) -> list[str]:
        """The ``pypi`` preset of ``allow_hosts`` reaches ``pypi_index``'s host: where the lock has
        an ``allow_hosts`` rule and no ``pypi_index`` one, pypi_index must be its default."""
        if not backend.has_trait("pypi_index"):
            return []
        rules = [document.get(cls.__name__, {}) for _, document in self.rules for cls in type(backend).__mro__]
        if not any("allow_hosts" in r for r in rules) or any("pypi_index" in r for r in rules):
            return []
        default = backend.traits()["pypi_index"].default_value
        index = changes.get("pypi_index", backend.pypi_index)
        if index.rstrip("/") == default.rstrip("/"):
            return []
        return [f"{type(backend).__name__}.pypi_index must be {default!r} while the lock restricts allow_hosts and "
                f"does not name pypi_index (the pypi preset reaches its host), not {index!r}"]

    def check_output(self, options: dict[str, Any]) -> None:
        """Refuse output options beyond the lock: ``options`` is ``{name: value}`` as the
        policy is built (``output_policy``, ``allowed_origins``, ...).

        Raises:
            Locked: one message listing every refused option.
        """
        problems = []
        for _, document in self.rules:
            if (ceiling := document.get("output_policy")) is not None and \
                    POLICY_ORDER.index(options["output_policy"]) > POLICY_ORDER.index(ceiling):
                problems.append(f"output_policy may be at most {ceiling!r} (sanitize < isolate < trust), "
                                f"not {options['output_policy']!r}")
            section = document.get("OutputOptions", {})
            problems += [f"OutputOptions.{name} is no output option (they are {', '.join(sorted(options))}): a "
                         "misspelt rule would lock nothing" for name in section if name not in options]
            problems += _check_values("OutputOptions", {k: v for k, v in section.items() if k in options}, options)
        self.refuse(problems)

    def per_user(self) -> tuple[int | None, int | None]:
        """``(sandboxes, memory bytes)``: the tightest per-user quotas, None where none is set."""
        sandboxes = [d["per_user"]["sandboxes"] for _, d in self.rules if "sandboxes" in d.get("per_user", {})]
        memory = [parse_bytes(d["per_user"]["memory"]) for _, d in self.rules if "memory" in d.get("per_user", {})]
        return min(sandboxes, default=None), min(memory, default=None)


def _check_section(section: str, rules: dict[str, Any], backend: Any, exact: bool,
                   changes: dict[str, Any]) -> list[str]:
    """The problems of ``backend`` (with ``changes`` to its options) with the lock's ``section``;
    ``exact``: the section names its own class, so an option it does not have is a typo in the
    lock, which cannot apply it."""
    unknown = [f"{section}.{name} is not an option of the {backend.name} backend (the lock cannot apply it)"
               for name in rules if exact and not backend.has_trait(name)]
    values = {name: changes[name] if name in changes else getattr(backend, name) for name in rules
              if backend.has_trait(name)}
    return unknown + _check_values(section, rules, values, traits=backend.trait_names())


def _check_values(section: str, rules: dict[str, Any], values: dict[str, Any],
                  traits: list[str] | None = None) -> list[str]:
    problems = []
    for name, rule in rules.items():
        if traits is not None and name not in traits:
            continue  # e.g. a Backend section's option that this backend does not have
        if name in values and (problem := _judge(name, rule, values[name])):
            problems.append(f"{section}.{name} {problem}")
    return problems


def _is_rule(rule: Any, kind: str) -> bool:
    """``rule`` is ``{kind: ...}`` (any other JSON object is a value an option must equal, e.g.
    ``{}`` for a dict option; a misspelt rule such as ``{"maximum": ...}`` is then a value no
    option has, and refuses every sandbox with the message that says so)."""
    return isinstance(rule, dict) and set(rule) == {kind}


def _judge(name: str, rule: Any, value: Any) -> str | None:
    """Why ``value`` breaks ``rule``, or None."""
    if _is_rule(rule, "max"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"has {value!r}, not a number: a max cannot apply to it"
        in_bytes = isinstance(rule["max"], str)  # "2g"
        ceiling = parse_bytes(rule["max"]) if in_bytes else rule["max"]
        def show(n: float) -> str:
            return format_bytes(int(n)) if in_bytes else f"{n:g}"
        if value == 0 and name in ZERO_IS_UNLIMITED:
            return f"must be at most {show(ceiling)}, not unlimited (0)"
        return None if value <= ceiling else f"must be at most {show(ceiling)}, not {show(value)}"
    if _is_rule(rule, "one_of"):
        return None if value in rule["one_of"] else f"must be one of {rule['one_of']!r}, not {value!r}"
    if _is_rule(rule, "subset_of"):
        if not isinstance(value, list | tuple | set | frozenset):
            return f"has {value!r}, not a list: a subset_of cannot apply to it"
        extra = [item for item in value if item not in rule["subset_of"]]
        return f"may only hold {rule['subset_of']!r}, not {extra!r}" if extra else None
    if isinstance(value, tuple | list | set | frozenset):
        value = list(value)
    elif isinstance(value, dict):
        value = dict(value)
    return None if value == rule else f"must be {rule!r}, not {value!r}"


def _validate(path: Path, document: Any) -> None:
    """Raise :class:`Locked` for a lock file this module cannot apply exactly as written."""
    def bad(what: str) -> Locked:
        return Locked(f"The administrator's lock {path} {what}: no sandbox starts until it is fixed.")
    if not isinstance(document, dict):
        raise bad("is not a JSON object")
    for key, value in document.items():
        if key in _TOP:
            if key == "per_user" and (not isinstance(value, dict) or set(value) - _PER_USER):
                raise bad(f"has per_user keys other than {sorted(_PER_USER)}")
            if key == "output_policy" and value not in POLICY_ORDER:
                raise bad(f"has output_policy {value!r}, not one of {', '.join(POLICY_ORDER)}")
            if key == "backends" and not (isinstance(value, list) and all(isinstance(n, str) for n in value)):
                raise bad(f"has backends = {json.dumps(value)}, not a list of backend names such as [\"docker\"]")
            if key == "per_user" and (problem := _per_user_problem(value)):
                raise bad(f"has per_user.{problem[0]} = {json.dumps(value[problem[0]])}, {problem[1]}")
        elif key not in sections() or not isinstance(value, dict):
            raise bad(f"has an unknown setting {key!r} (settings: {', '.join(sorted(_TOP | sections()))})")
        else:
            for name, rule in value.items():
                if why := _rule_problem(rule):
                    raise bad(f"has {key}.{name} = {json.dumps(rule)}, {why}")


def _per_user_problem(quotas: dict[str, Any]) -> tuple[str, str] | None:
    """``(key, why)`` of a ``per_user`` quota that is not a whole number (``sandboxes``) or a size
    (``memory``), or None."""
    sandboxes = quotas.get("sandboxes", 0)
    if isinstance(sandboxes, bool) or not isinstance(sandboxes, int) or sandboxes < 0:
        return "sandboxes", "not a whole number of sandboxes"
    try:
        if parse_bytes(quotas.get("memory", 0)) < 0:
            raise ValueError
    except ValueError:
        return "memory", "not a size such as \"4g\""
    return None


def _rule_problem(rule: Any) -> str | None:
    """Why a class section's ``rule`` cannot be applied as written (``max`` neither a number nor a
    size, ``one_of`` or ``subset_of`` not a list), or None. Any other value is one an option must equal."""
    if _is_rule(rule, "max"):
        ceiling = rule["max"]
        try:
            if isinstance(ceiling, str):
                parse_bytes(ceiling)
            elif isinstance(ceiling, bool) or not isinstance(ceiling, int | float):
                raise ValueError
        except ValueError:
            return "whose max is neither a number nor a size such as \"2g\""
    for kind in ("one_of", "subset_of"):
        if _is_rule(rule, kind) and not isinstance(rule[kind], list):
            return f"whose {kind} is not a list"
    return None


def sections() -> set[str]:
    """The class sections a lock may have: every registered backend's class (entry points
    ``sandbox_kernel.backends``, read without importing them), their bases, ``OutputOptions``."""
    return {*backend_class_names(), "Backend", "KernelClientBackend", "OutputOptions"}


def load(dirs: tuple[Path, ...] | None = None) -> Lock:
    """The lock from every ``sandbox_kernel_lock.json`` in ``dirs`` (default :data:`LOCK_DIRS`;
    none found: nothing is locked).

    Raises:
        Locked: a lock file cannot be read, is not JSON, or holds a setting it does not know or a
            rule it cannot apply.
    """
    rules = []
    for folder in dict.fromkeys(LOCK_DIRS if dirs is None else dirs):
        path = folder / LOCK_NAME
        if not path.exists():
            continue
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise Locked(f"The administrator's lock {path} cannot be read ({exc}): no sandbox starts until it "
                         "is fixed.") from exc
        _validate(path, document)
        rules.append((path, document))
    return Lock(tuple(rules))

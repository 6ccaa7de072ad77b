"""``sandbox-kernel pool status|stop`` (entry point ``sandbox_kernel.commands``): the sandboxes
waiting in this host's warm pools, of every backend that declares ``capabilities.pool``.

It imports no backend module: it finds them by name in the backends' registry and asks each
class (:meth:`pool_status`, :meth:`pool_stop`, classmethods of a pooled backend).
"""

from __future__ import annotations

from typing import Any

from ...runtime.traits import format_bytes

HELP = "list (status) or remove (stop) the sandboxes waiting in this host's warm pools"
"""The line ``sandbox-kernel --help`` shows."""


def pooled_backends() -> dict[str, Any]:
    """``{name: backend class}`` of the installed backends that keep warm pools."""
    from ...core.errors import SandboxError
    from .. import backend_names, get_backend_class

    found = {}
    for name in backend_names():
        try:
            cls = get_backend_class(name)
        except SandboxError:  # its optional dependency is missing: it has no pool here
            continue
        if cls.capabilities.pool:
            found[name] = cls
    return found


def configure(parser: Any) -> None:
    parser.add_argument("action", choices=("status", "stop"), help="status: list them; stop: remove them")
    parser.add_argument("--backend", action="append",
                        help="only this backend's pool (repeatable); default: every backend that keeps one")


def run(args: Any) -> int:
    """List or remove the waiting pooled sandboxes; returns the exit status (0; 2 for a backend
    that keeps no pool).

    Raises:
        BackendUnavailable: a backend asked for by name cannot reach its engine.
    """
    pooled = pooled_backends()
    if unknown := [name for name in args.backend or [] if name not in pooled]:
        print(f"sandbox-kernel pool: {', '.join(unknown)} keeps no warm pool here "
              f"(backends with one: {', '.join(pooled) or 'none'})")
        return 2
    chosen = {name: pooled[name] for name in args.backend or pooled}
    if args.action == "stop":
        removed = [name for cls in chosen.values() for name in cls.pool_stop(asked=bool(args.backend))]
        for name in removed:
            print(f"removed {name}")
        print(f"{len(removed)} removed" if removed else "no pooled sandbox to remove")
        return 0
    rows = [{"backend": name, **row} for name, cls in chosen.items() for row in cls.pool_status(asked=bool(args.backend))]
    for row in rows:
        memory = format_bytes(row["memory_bytes"]) if row.get("memory_bytes") else "?"
        print(f"{row['backend']:7} {row['name']}  key {row['key']}  waiting {row['waited_s']:.0f} s  memory {memory}")
    total = sum(row.get("memory_bytes") or 0 for row in rows)
    print(f"{len(rows)} pooled sandbox(es) waiting, holding {format_bytes(total)}" if rows else "no pooled sandbox waiting")
    return 0

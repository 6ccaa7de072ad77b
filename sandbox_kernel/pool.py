"""Warm pools: sandboxes started ahead of the sessions that will take them, so a new notebook,
a restart or a new agent session does not wait for a sandbox's kernel to boot.

A backend with ``pool_size`` N > 0 (``local`` and ``docker``) keeps up to N sandboxes of its
configuration started on this host, each with its kernel ready. The pool is keyed by
everything that shapes a sandbox (:meth:`key`, computed by the backend: for docker the
container's whole specification, the image's id and the transport), so a session only ever
takes a sandbox made exactly as it would have made one itself.

* **Registry.** Each pooled sandbox is one JSON file, ``POOL_ROOT/BACKEND/KEY/NAME.json``
  (mode 0600 in a 0700 directory of this user: it holds the kernel's connection key).
* **Taking one is atomic.** A session claims an entry by renaming its file into
  ``POOL_ROOT/claimed/`` (``rename(2)`` is atomic: of two kernels started at the same moment,
  one gets the file, the other ``FileNotFoundError`` and tries the next). The claimed file
  records the claiming process (``HOST/PID/STARTTIME``).
* **Used once.** A sandbox never goes back to the pool; the session removes it as any other.
* **It ends with its session.** A pooled sandbox waits for its claim on a stream nobody holds
  yet (the container's stdin for docker, a unix socket for local); the session that takes it
  holds that stream, and when that process ends, for whatever reason, the sandbox ends too.
  One nobody takes within ``pool_ttl`` seconds ends by itself.
* **Refill in the background.** After each take (or a start that found the pool empty), a
  detached process, ``python -m sandbox_kernel.pool``, starts sandboxes until the key has N
  again (one filler per key at a time: a ``flock``), at a lower CPU priority (``nice``), so the
  refill does not slow the cell that took one. It is given the backend's options and checks
  that it computes the same key, else it starts nothing.
* **A dead one is skipped.** A pooled sandbox that died while it waited is discarded and the
  next taken, or one is started cold, with nothing shown to the user.

``sandbox-kernel pool status`` lists the pooled sandboxes; ``sandbox-kernel pool stop`` (and
``sandbox-kernel gc`` for docker) removes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Protocol

from traitlets import Float, Integer

from .owners import owner

POOL_ROOT = Path(tempfile.gettempdir()) / f"sandbox-kernel-pool-{os.getuid() if hasattr(os, 'getuid') else 0}"
"""This user's pool registry on this host."""
CLAIMED = "claimed"
FILL_LOG = "fill.log"


def pool_size_trait() -> Integer:
    """The ``pool_size`` option, as each pooled backend declares it."""
    return Integer(0, min=0, help="Sandboxes of this configuration kept started on this host, each with its kernel "
                                  "ready, for new sessions to take (used once each; refilled in the background). "
                                  "0: none, every session starts its own. Each holds its memory while it waits "
                                  "(measured: about 49 MiB for local, 36 MiB for docker; 67 MiB with numpy and pandas imported). "
                                  "`sandbox-kernel pool stop` removes them.").tag(config=True)


def pool_ttl_trait() -> Float:
    """The ``pool_ttl`` option, as each pooled backend declares it."""
    return Float(3600.0, min=1.0, help="Seconds a pooled sandbox waits to be taken; then it ends by itself.").tag(
        config=True)


def key_of(parts: Any) -> str:
    """A pool key: 16 hex digits of the SHA-256 of ``parts`` as canonical JSON (objects the
    JSON module cannot write are taken by ``repr``)."""
    text = json.dumps(parts, sort_keys=True, default=repr, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def options_of(backend: Any) -> dict[str, Any]:
    """A backend's configurable option values, to make the same sandboxes in the filler."""
    return {name: getattr(backend, name) for name in backend.trait_names(config=True)}


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


class Registry:
    """The pooled sandboxes of one backend and key on this host (see the module docstring)."""

    def __init__(self, backend: str, key: str, root: Path = POOL_ROOT) -> None:
        self.backend, self.key, self.root = backend, key, root
        self.dir = root / backend / key

    def offer(self, name: str, record: dict[str, Any]) -> None:
        """Put a started sandbox in the pool (atomically: a reader never sees half a file)."""
        _private_dir(self.dir)
        temporary = self.dir / f".{name}.new"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as file:
            json.dump({**record, "name": name, "offered": time.time()}, file)
        os.replace(temporary, self.dir / f"{name}.json")

    def entries(self) -> list[dict[str, Any]]:
        """The records waiting in the pool, oldest first."""
        records = []
        for path in sorted(self.dir.glob("*.json"), key=_mtime):
            with contextlib.suppress(OSError, ValueError):
                records.append(json.loads(path.read_text()))
        return records

    def count(self) -> int:
        return len(list(self.dir.glob("*.json")))

    def claim(self) -> dict[str, Any] | None:
        """Take the oldest waiting sandbox's record, atomically (``rename(2)``), or None when
        the pool is empty. The caller owns it from then on (:func:`release` when it is gone)."""
        claimed = _private_dir(self.root / CLAIMED)
        for path in sorted(self.dir.glob("*.json"), key=_mtime):
            target = claimed / f"{self.backend}-{path.name}"
            try:
                os.rename(path, target)
            except FileNotFoundError:  # another session took it first
                continue
            try:
                record = json.loads(target.read_text())
            except (OSError, ValueError):
                target.unlink(missing_ok=True)
                continue
            record["claimed_by"] = owner()
            with contextlib.suppress(OSError):
                target.write_text(json.dumps(record))
            return record
        return None

    def withdraw(self, name: str) -> bool:
        """Remove a waiting sandbox's record (to stop it); False if it was taken meanwhile."""
        try:
            (self.dir / f"{name}.json").unlink()
        except FileNotFoundError:
            return False
        return True


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def release(backend: str, name: str, root: Path = POOL_ROOT) -> None:
    """Forget a claimed sandbox (its session removed it)."""
    (root / CLAIMED / f"{backend}-{name}.json").unlink(missing_ok=True)


def claimed_records(backend: str, root: Path = POOL_ROOT) -> list[dict[str, Any]]:
    """The records of ``backend``'s claimed sandboxes on this host."""
    records = []
    for path in (root / CLAIMED).glob(f"{backend}-*.json"):
        with contextlib.suppress(OSError, ValueError):
            records.append(json.loads(path.read_text()))
    return records


def waiting_records(backend: str, root: Path = POOL_ROOT) -> list[tuple[Registry, dict[str, Any]]]:
    """Every key's waiting sandboxes of ``backend`` on this host, with their registry."""
    found = []
    for directory in sorted((root / backend).glob("*")) if (root / backend).is_dir() else []:
        registry = Registry(backend, directory.name, root)
        found += [(registry, record) for record in registry.entries()]
    return found


class Poolable(Protocol):
    """What a backend gives its pool (``local`` and ``docker`` implement it)."""

    name: str
    pool_size: int
    pool_ttl: float
    log: Any

    async def _pool_key(self) -> str | None:
        """The key of the sandboxes this backend makes now, or None when its configuration
        is not pooled."""

    async def _pool_launch(self) -> tuple[str, dict[str, Any]]:
        """Start a sandbox that waits to be claimed (outliving this process); return its name
        and the JSON record a session needs to take it over."""

    async def _adopt(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """Take over a pooled sandbox as if :meth:`_launch` had started it: return its
        kernel's connection info, or None when it is gone (then it is discarded)."""

    async def _pool_discard(self, record: dict[str, Any]) -> None:
        """Remove a pooled sandbox (dead, or a claim gone wrong). Must not raise."""

    def _pool_options(self) -> dict[str, Any]:
        """The backend's option values, as JSON, to make the same sandboxes in the filler."""


async def take(backend: Poolable) -> dict[str, Any] | None:
    """A pooled sandbox's connection info for ``backend``, taken over (see the module
    docstring), or None: no pool, or none waiting (start one cold). Starts the refill."""
    if backend.pool_size <= 0:
        return None
    key = await backend._pool_key()
    if key is None:
        return None
    registry = Registry(backend.name, key)
    info = None
    try:
        while info is None and (record := registry.claim()) is not None:
            try:
                info = await backend._adopt(record)
            except Exception as exc:  # noqa: BLE001 - a pooled sandbox gone wrong: start one cold
                backend.log.info("could not take pooled sandbox %s: %s", record.get("name"), exc)
                info = None
            if info is None:
                await backend._pool_discard(record)
                release(backend.name, record["name"])
        return info
    finally:
        refill(backend, key)


def refill(backend: Poolable, key: str) -> None:
    """Start the detached filler for ``key`` unless the pool is full. Never raises."""
    if Registry(backend.name, key).count() >= backend.pool_size:
        return
    order = {"backend": backend.name, "key": key, "size": backend.pool_size, "options": backend._pool_options()}
    try:
        log = open(_private_dir(POOL_ROOT) / FILL_LOG, "ab")
        with log:
            filler = subprocess.Popen([sys.executable, "-m", "sandbox_kernel.pool"], stdin=subprocess.PIPE,
                                      stdout=log, stderr=log, start_new_session=True, close_fds=True)
        filler.stdin.write(json.dumps(order).encode())
        filler.stdin.close()
    except OSError as exc:
        backend.log.warning("could not start the pool's filler: %s", exc)


async def fill(order: dict[str, Any]) -> int:
    """The filler: start sandboxes for ``order["key"]`` until it has ``order["size"]``.
    Returns how many it started."""
    from .backends import get_backend_class

    lock = open(_private_dir(POOL_ROOT) / f"{order['backend']}-{order['key']}.lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # another filler has this key
        return 0
    backend = get_backend_class(order["backend"])(**order["options"])
    if (key := await backend._pool_key()) != order["key"]:
        print(f"pool filler: the options give key {key}, not {order['key']}: nothing started", file=sys.stderr)
        return 0
    registry, started = Registry(order["backend"], key), 0
    while registry.count() < order["size"]:
        name, record = await backend._pool_launch()
        registry.offer(name, record)
        started += 1
    return started


# -- ``sandbox-kernel pool status|stop`` (entry point ``sandbox_kernel.commands``) -------------
HELP = "list (status) or remove (stop) the sandboxes waiting in this host's warm pools"
"""The line ``sandbox-kernel --help`` shows."""


def configure(parser: Any) -> None:
    parser.add_argument("action", choices=("status", "stop"), help="status: list them; stop: remove them")
    parser.add_argument("--backend", choices=("local", "docker"), action="append",
                        help="only this backend's pool (repeatable); default: both")


def run(args: Any) -> int:
    """List or remove the waiting pooled sandboxes; returns the exit status, 0.

    Raises:
        BackendUnavailable: the Docker engine cannot be reached (only when asked for docker's pool).
    """
    backends = args.backend or ["local", "docker"]
    rows: list[dict[str, Any]] = []
    removed: list[str] = []
    if "local" in backends:
        from .backends import local

        for registry, record in waiting_records("local"):
            if args.action == "stop":
                if registry.withdraw(record["name"]):
                    local.remove_pooled(record)
                    removed.append(record["name"])
            else:
                rows.append({"backend": "local", "name": record["name"], "key": registry.key,
                             "waited_s": time.time() - record.get("offered", time.time()),
                             "memory_bytes": local.process_memory(record["pid"]) if local.pooled_alive(record) else None})
    if "docker" in backends and (args.backend or waiting_records("docker") or args.action == "stop"):
        from .backends.docker import engine, pooled
        from .errors import BackendUnavailable

        try:
            client = engine.connect()
        except BackendUnavailable:
            if args.backend:  # asked for by name
                raise
            client = None
        if client is not None:
            try:
                if args.action == "stop":
                    removed += pooled.sweep(client, waiting_too=True)
                else:
                    rows += [{"backend": "docker", **row} for row in pooled.status(client)]
            finally:
                client.close()
    if args.action == "stop":
        for name in removed:
            print(f"removed {name}")
        print(f"{len(removed)} removed" if removed else "no pooled sandbox to remove")
        return 0
    from .traits import format_bytes

    for row in rows:
        memory = format_bytes(row["memory_bytes"]) if row.get("memory_bytes") else "?"
        print(f"{row['backend']:7} {row['name']}  key {row['key']}  waiting {row['waited_s']:.0f} s  memory {memory}")
    total = sum(row.get("memory_bytes") or 0 for row in rows)
    print(f"{len(rows)} pooled sandbox(es) waiting, holding {format_bytes(total)}" if rows else "no pooled sandbox waiting")
    return 0


def main() -> int:  # pragma: no cover - runs detached (tests start it through a backend)
    with contextlib.suppress(OSError):
        os.nice(10)
    order = json.loads(sys.stdin.read())
    try:
        asyncio.run(fill(order))
    except Exception as exc:  # noqa: BLE001 - a detached process: its log says why
        print(f"{time.strftime('%F %T')} pool filler ({order.get('backend')}): {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

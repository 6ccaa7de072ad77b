"""The registry of warm pools on this host: one JSON record per pooled sandbox, taken atomically
(see :mod:`sandbox_kernel.backends.pool`), and the two options every pooled backend declares."""


from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

from traitlets import Float, Integer

from ...runtime.owners import owner

ROOT_VARIABLE = "SANDBOX_KERNEL_POOL_ROOT"
"""The environment variable that names the registry's folder instead of the default (a test run,
or two deployments of one user that must not take each other's sandboxes)."""


def pool_root() -> Path:
    """This user's pool registry on this host: ``$SANDBOX_KERNEL_POOL_ROOT`` when set, else
    ``TMPDIR/sandbox-kernel-pool-UID``. Read at each call, so a filler or a kernel started with
    the variable uses the same registry as the process that started it."""
    if value := os.environ.get(ROOT_VARIABLE):
        return Path(value)
    return Path(tempfile.gettempdir()) / f"sandbox-kernel-pool-{os.getuid() if hasattr(os, 'getuid') else 0}"
CLAIMED = "claimed"
FILL_LOG = "fill.log"


def pool_size_trait() -> Integer:
    """The ``pool_size`` option, as each pooled backend declares it."""
    return Integer(0, min=0, help="Sandboxes of this configuration kept started on this host, each with its kernel "
                                  "ready, for new sessions (a new notebook, a restart, %%sandbox --pool-size 2, "
                                  "Sandbox('docker', pool_size=2)) to take at once (used once each; refilled in the "
                                  "background). 0: none, every session starts its own. Each holds its memory while "
                                  "it waits (measured: about 49 MiB for local, 36 MiB for docker; 67 MiB with numpy "
                                  "and pandas imported). `sandbox-kernel pool stop` removes them.").tag(config=True)


def pool_ttl_trait() -> Float:
    """The ``pool_ttl`` option, as each pooled backend declares it."""
    return Float(3600.0, min=1.0, help="Seconds a pooled sandbox lives untaken, counted from its start (its "
                 "kernel's start included); then it ends by itself.").tag(config=True)


def key_of(parts: Any) -> str:
    """A pool key: 16 hex digits of the SHA-256 of ``parts`` as canonical JSON (objects the
    JSON module cannot write are taken by ``repr``)."""
    text = json.dumps(parts, sort_keys=True, default=repr, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def options_of(backend: Any) -> dict[str, Any]:
    """A backend's configurable option values, to make the same sandboxes in the filler."""
    return {name: getattr(backend, name) for name in backend.trait_names(config=True)}


def _ours(root: Path) -> bool:
    """Whether ``root`` is missing or this user's private folder: a directory (not a link) this
    user owns, closed to others (closed here if it was open: the records hold connection keys).
    The default root is in the shared temporary folder, where another
    user could make it first and plant records (a "claimed" record whose process group the sweep
    would signal, a waiting "sandbox" a session would adopt): such a registry is never read."""
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != os.getuid()):
        return False
    if st.st_mode & 0o077:  # this user's, but open to others (made with the umask's mode before): close it
        try:
            os.chmod(root, 0o700)
        except OSError:
            return False
    return True


def _private_dir(path: Path, root: Path | None = None) -> Path:
    """``path`` (below ``root``), made 0700 if missing.

    Raises:
        PermissionError: ``root`` (default :func:`pool_root`) is not this user's private folder
            (see :func:`_ours`).
    """
    root = root or pool_root()
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _ours(root):
        raise PermissionError(f"The warm pool's folder {root} is a link, another user's, or open to others: "
                              "no sandbox is pooled; remove it.")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


class Registry:
    """The pooled sandboxes of one backend and key on this host (see the module docstring)."""

    def __init__(self, backend: str, key: str, root: Path | None = None) -> None:
        self.backend, self.key, self.root = backend, key, root or pool_root()
        self.dir = self.root / backend / key

    def offer(self, name: str, record: dict[str, Any]) -> None:
        """Put a started sandbox in the pool (atomically: a reader never sees half a file).
        Raises PermissionError for a registry that is not this user's (:func:`_private_dir`)."""
        _private_dir(self.dir, self.root)
        temporary = self.dir / f".{name}.new"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as file:
            json.dump({**record, "name": name, "offered": time.time()}, file)
        os.replace(temporary, self.dir / f"{name}.json")

    def entries(self) -> list[dict[str, Any]]:
        """The records waiting in the pool, oldest first (none in a registry not this user's)."""
        records = []
        if not _ours(self.root):
            return records
        for path in sorted(self.dir.glob("*.json"), key=_mtime):
            with contextlib.suppress(OSError, ValueError):
                records.append(json.loads(path.read_text()))
        return records

    def count(self) -> int:
        return len(list(self.dir.glob("*.json"))) if _ours(self.root) else 0

    def claim(self) -> dict[str, Any] | None:
        """Take the oldest waiting sandbox's record, atomically (``rename(2)``), or None when
        the pool is empty (or not this user's). The caller owns it from then on (:func:`release`
        when it is gone)."""
        if not _ours(self.root):
            return None
        claimed = _private_dir(self.root / CLAIMED, self.root)
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


def release(backend: str, name: str, root: Path | None = None) -> None:
    """Forget a claimed sandbox (its session removed it)."""
    root = root or pool_root()
    (root / CLAIMED / f"{backend}-{name}.json").unlink(missing_ok=True)


def claimed_records(backend: str, root: Path | None = None) -> list[dict[str, Any]]:
    """The records of ``backend``'s claimed sandboxes on this host (none in a registry not this
    user's: :func:`_ours`)."""
    root = root or pool_root()
    records = []
    if not _ours(root):
        return records
    for path in (root / CLAIMED).glob(f"{backend}-*.json"):
        with contextlib.suppress(OSError, ValueError):
            records.append(json.loads(path.read_text()))
    return records


def waiting_records(backend: str, root: Path | None = None) -> list[tuple[Registry, dict[str, Any]]]:
    """Every key's waiting sandboxes of ``backend`` on this host, with their registry (none in a
    registry not this user's)."""
    root = root or pool_root()
    found = []
    if not _ours(root):
        return found
    for directory in sorted((root / backend).glob("*")) if (root / backend).is_dir() else []:
        registry = Registry(backend, directory.name, root)
        found += [(registry, record) for record in registry.entries()]
    return found

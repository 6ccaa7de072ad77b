"""Warm pools: sandboxes started ahead of the sessions that will take them, so a new notebook,
a restart or a new agent session does not wait for a sandbox's kernel to boot.

A backend with ``pool_size`` N > 0 (``local`` and ``docker``) keeps up to N sandboxes of its
configuration started on this host, each with its kernel ready. The pool is keyed by
everything that shapes a sandbox (:meth:`key`, computed by the backend: for docker the
container's whole specification, the image's id and the transport), so a session only ever
takes a sandbox made exactly as it would have made one itself.

* **Registry.** Each pooled sandbox is one JSON file, ``ROOT/BACKEND/KEY/NAME.json``
  (mode 0600 in a 0700 directory of this user: it holds the kernel's connection key; a registry
  folder that is a link or another user's is never read nor written). ``ROOT`` is
  ``$SANDBOX_KERNEL_POOL_ROOT``, by default ``/tmp/sandbox-kernel-pool-UID`` (:func:`pool_root`).
* **Taking one is atomic.** A session claims an entry by renaming its file into
  ``ROOT/claimed/`` (``rename(2)`` is atomic: of two kernels started at the same moment,
  one gets the file, the other ``FileNotFoundError`` and tries the next). The claimed file
  records the claiming process (``HOST/PID/STARTTIME``).
* **Used once.** A sandbox never goes back to the pool; the session removes it as any other.
* **It ends with its session.** A pooled sandbox waits for its claim on a stream nobody holds
  yet (the container's stdin for docker, a unix socket for local); the session that takes it
  holds that stream, and when that process ends, for whatever reason, the sandbox ends too.
  One nobody takes within ``pool_ttl`` seconds ends by itself.
* **Refill in the background.** After each take (or a start that found the pool empty), a
  detached process, ``python -m sandbox_kernel.backends.pool.filler``, starts sandboxes until the key has N
  again (one filler per key at a time: a ``flock``), at a lower CPU priority (``nice``), so the
  refill does not slow the cell that took one. It is given the backend's options and checks
  that it computes the same key, else it starts nothing.
* **A dead one is skipped.** A pooled sandbox that died while it waited is discarded and the
  next taken, or one is started cold, with nothing shown to the user.

``sandbox-kernel pool status`` lists the pooled sandboxes; ``sandbox-kernel pool stop`` (and
``sandbox-kernel gc`` for docker) removes them.

The package imports none of the backends: a backend that keeps a pool declares
``capabilities.pool`` and implements :class:`~.filler.Poolable`; ``sandbox-kernel pool``
(:mod:`.command`) asks each such backend class for its waiting sandboxes.
"""

from .filler import Poolable, refill, take
from .registry import (
                       ROOT_VARIABLE,
                       Registry,
                       claimed_records,
                       key_of,
                       options_of,
                       pool_root,
                       pool_size_trait,
                       pool_ttl_trait,
                       release,
                       waiting_records,
)

__all__ = ["ROOT_VARIABLE", "Poolable", "Registry", "claimed_records", "key_of", "options_of", "pool_root",
           "pool_size_trait", "pool_ttl_trait", "refill", "release", "take", "waiting_records"]

"""How the sandbox's ipykernel is started so that its IOPub never drops a message.

libzmq's PUB (ipykernel 7: XPUB) socket drops a message for a subscriber whose queue holds
``SNDHWM`` messages (default 1000), silently. A burst of small outputs (``for i in
range(5000): display(i)``) outruns the host's reader, and what is dropped is any message: an
output, or the cell's ``status: idle``, after which the host waited for ever (measured: 4489 of
5000 displays, then no cell of the session ever ended). :data:`IOPUB_APP` starts ipykernel with
an IOPub socket of unlimited ``SNDHWM``: what the host has not read yet waits in the sandbox,
in the sandbox's memory and under its limits. The host reads at its own pace (its receive
queue keeps libzmq's default bound, and the backend bounds in bytes what it holds,
:mod:`.backend`), so a flood costs the host nothing.
"""

from __future__ import annotations

from pathlib import Path

from ..checkpoint.inside import MODULE as CHECKPOINTS_MODULE
from ..checkpoint.inside import launcher_prelude

READY_VARIABLE = "SANDBOX_KERNEL_SAY_READY"
READY_LINE = "sandbox-kernel: kernel ready"
"""With :data:`READY_VARIABLE` set, the kernel writes this line on its stderr once its sockets are
bound, as its event loop starts: a pooled sandbox's filler offers it only then."""

SEED_VARIABLE = "SANDBOX_KERNEL_JEDI_SEED"
"""An image's variable naming its prebuilt jedi cache (the default image's recipe builds one):
the launcher links it into the kernel's cache folder, and the kernel front door then leaves out
its completion warm-up."""

OUTSTREAM_SOURCE = (Path(__file__).resolve().parents[2] / "runtime" / "outstream.py").read_text()
"""The source of :mod:`sandbox_kernel.runtime.outstream` (ipykernel and the standard library
only), which the sandbox's kernel runs too: its ``PromptFlushOutStream`` is that kernel's
``outstream_class``. Read as text, not imported: this process may have no use for ipykernel."""

OUTSTREAM_MODULE = "_sandbox_kernel_outstream"
"""The name the sandbox's kernel loads :data:`OUTSTREAM_SOURCE` under (in ``sys.modules``), so that
``outstream_class`` names it: not ``__main__``, which IPython replaces with the user's namespace
once the shell exists, where a kernel promoted from a checkpoint would then look for it."""

HISTORY_CONNECTION = """
import sqlite3


class HistoryConnection(sqlite3.Connection):
    # IPython's history database in write-ahead-log mode, its commits not synced to the disk: a
    # cell's commit of its input (on IPython's history thread, holding the lock that the next
    # cell's store_inputs takes) costs tens of microseconds instead of a journal file made,
    # synced and deleted (2.6 ms median here, 20 ms at p95 on a loaded disk). A crash of the
    # kernel loses nothing; one of the machine may lose the last cells' history.
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        try:
            self.execute("PRAGMA journal_mode=WAL")
            self.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.DatabaseError:
            pass  # a database that cannot (a read-only folder): as IPython opened it
"""

IOPUB_APP = f"""\
from ipykernel.kernelapp import IPKernelApp  # first: an image without ipykernel says so by name
import os
import sys
import zmq
from traitlets import DottedObjectName

_SAY_READY = os.environ.pop("{READY_VARIABLE}", "")


def _seed_jedi_cache(seed):
    # an image's prebuilt jedi cache (SEED/TAG/*.pkl), linked into this kernel's own cache
    # folder (as jedi finds it) so that new entries can still be written there
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "jedi")
    try:
        for tag in os.listdir(seed):
            if not os.path.isdir(os.path.join(seed, tag)):
                continue  # parso's lock file
            os.makedirs(os.path.join(cache, tag), exist_ok=True)
            for name in os.listdir(os.path.join(seed, tag)):
                if not os.path.lexists(os.path.join(cache, tag, name)):
                    os.symlink(os.path.join(seed, tag, name), os.path.join(cache, tag, name))
    except OSError:
        pass  # no cache: the first completion parses, as in any new kernel


if os.environ.get("{SEED_VARIABLE}"):
    _seed_jedi_cache(os.environ["{SEED_VARIABLE}"])


_outstream = type(sys)("{OUTSTREAM_MODULE}")
exec(compile({OUTSTREAM_SOURCE!r}, "sandbox-kernel-outstream", "exec"), _outstream.__dict__)
sys.modules["{OUTSTREAM_MODULE}"] = _outstream
{HISTORY_CONNECTION}

class LosslessIOPubKernelApp(IPKernelApp):
    outstream_class = DottedObjectName("{OUTSTREAM_MODULE}.PromptFlushOutStream")

    def init_kernel(self):
        # before the shell and its HistoryManager are made
        self.config.HistoryManager.connection_options = dict(check_same_thread=False, factory=HistoryConnection)
        super().init_kernel()

    def init_iopub(self, context):
        # IOPub never drops: messages wait in the sandbox until the host reads them
        context.setsockopt(zmq.SNDHWM, 0)
        try:
            super().init_iopub(context)
        finally:
            context.sockopts.pop(zmq.SNDHWM, None)

    def start(self):
        if _SAY_READY:  # a pooled sandbox: its filler waits for this line
            sys.__stderr__.write("{READY_LINE}\\n")
            sys.__stderr__.flush()
        sys.modules["{CHECKPOINTS_MODULE}"].kernel_started()
        super().start()


""" + launcher_prelude() + """
LosslessIOPubKernelApp.launch_instance()
"""
"""Python source that starts ipykernel as ``ipykernel_launcher`` does (``-f CONNECTION_FILE``
and options on its argv), its IOPub socket with no high-water mark, its streams' flushes prompt
(:data:`OUTSTREAM_SOURCE`), its history database's commits cheap (:data:`HISTORY_CONNECTION`), and
with the module that checkpoints its process (:func:`..checkpoint.inside.launcher_prelude`).
Standard ipykernel only."""

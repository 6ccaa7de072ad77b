"""ipykernel's ``sys.stdout``/``sys.stderr`` stream, whose ``flush()`` returns at once when it
has nothing to send.

ipykernel flushes both streams before a cell's ``execute_result``, before its ``execute_reply``
and before its ``status: idle``: six flushes a cell, and each is a round trip to the IOPub thread
(it schedules the send there and waits for it), also when nothing was written. A round trip to
another thread costs 0.1-0.7 ms here (two GIL handovers), on a cell whose whole round trip is a
few milliseconds; the wrapper kernel pays four more around the sandbox's cell. A stream with
nothing buffered, no flush scheduled and no flush under way has nothing that waiting would send,
so it does not wait; otherwise it flushes as ipykernel does.

This module is the wrapper kernel's ``outstream_class``, and its source is also run inside the
sandbox by the kernel's launcher (:mod:`...backends.kernel_client.launcher`): it imports only
ipykernel and the standard library, and with another ipykernel's internals it flushes as that
ipykernel does.
"""

from ipykernel.iostream import OutStream


class PromptFlushOutStream(OutStream):
    """``OutStream`` whose :meth:`flush` skips the IOPub thread's round trip when nothing waits
    to be sent (see the module's docstring)."""

    _sending = 0  # flushes under way on the IOPub thread (their data left the buffers, not yet sent)

    def flush(self):
        if not self._waiting():
            return
        super().flush()

    def _flush(self):
        self._sending += 1
        try:
            super()._flush()
        finally:
            self._sending -= 1

    def _waiting(self):
        """Whether anything written may not have been sent yet: text in the buffers, a flush
        scheduled (``_flush_pending``) or under way, an echo to flush. True when ipykernel's
        internals are not the ones this reads."""
        try:
            if self._sending or self._flush_pending or self._subprocess_flush_pending or self.echo is not None:
                return True
            with self._buffer_lock:
                return any(buffer.tell() for buffer in self._buffers.values())
        except AttributeError:
            return True

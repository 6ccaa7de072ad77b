"""The shared Jupyter-kernel client that the local, docker and gateway backends build on.

:class:`KernelClientBackend` speaks the Jupyter messaging protocol through ``jupyter_client``'s
async client (:mod:`.backend`); a subclass only launches, stops and watches its kernel. IOPub
messages become events in :mod:`.messages`; :mod:`.message_bound` bounds the size of each
message from the sandbox and recovers the requests a dropped one belonged to; :mod:`.relay`
turns what comes back for one request into events and its Outcome; :mod:`.held` bounds in
bytes what waits for a relay, and :mod:`.launcher` starts the sandbox's ipykernel with an
IOPub that never drops a message; :mod:`.client` is jupyter_client's client with the socket
options a sandbox needs.
"""

from .backend import KernelClientBackend
from .message_bound import Request, drop_note
from .messages import COMM_TYPES, KERNEL_ARGS, QUIET_KERNEL_ENV, REPLY_STATUS, event_from_iopub, history_args, receive

__all__ = ["COMM_TYPES", "KERNEL_ARGS", "QUIET_KERNEL_ENV", "REPLY_STATUS", "KernelClientBackend", "Request", "drop_note",
           "event_from_iopub", "history_args", "receive"]

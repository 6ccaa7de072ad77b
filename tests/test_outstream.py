"""The kernels' prompt flush (sandbox_kernel.runtime.outstream) and the sandbox kernel's history
database (launcher.HISTORY_CONNECTION), in process: ipykernel's own IOPub thread and stream on a
real ZMQ socket, and a real SQLite file. What they save is measured in benchmarks/run.py."""

from __future__ import annotations

import sqlite3

import pytest
import zmq
from ipykernel.iostream import IOPubThread
from jupyter_client.session import Session

from sandbox_kernel.backends.kernel_client import launcher
from sandbox_kernel.runtime.outstream import PromptFlushOutStream

pytestmark = pytest.mark.unit


@pytest.fixture
def stream():
    """A PromptFlushOutStream on a started IOPubThread whose socket a SUB socket reads, and the
    list of what was scheduled on that thread."""
    context = zmq.Context()
    pub = context.socket(zmq.PUB)
    pub.bind("inproc://iopub")  # delivered as it is sent
    sub = context.socket(zmq.SUB)
    sub.subscribe(b"")
    sub.connect("inproc://iopub")
    session = Session(key=b"k")
    thread = IOPubThread(pub)
    thread.start()
    scheduled = []
    schedule = thread.schedule
    thread.schedule = lambda f: (scheduled.append(f), schedule(f))[1]
    out = PromptFlushOutStream(session, thread, "stdout", watchfd=False)
    try:
        yield out, sub, session, scheduled
    finally:
        out.close()
        thread.io_loop.add_callback(thread.io_loop.stop)  # not stop(): it leaves ipykernel's gc task pending
        thread.thread.join(30)
        context.destroy(linger=0)  # its sockets too: the event pipes stop() would close


def texts(sub, session, wait_ms: int = 2000) -> list[str]:
    """The stream texts read from ``sub`` until it is quiet for ``wait_ms``."""
    found = []
    while sub.poll(wait_ms):
        _, frames = session.feed_identities(sub.recv_multipart())
        found.append(session.deserialize(frames)["content"]["text"])
        wait_ms = 200
    return found


def test_a_flush_with_nothing_written_does_not_wait_for_the_iopub_thread(stream):
    out, _, _, scheduled = stream
    out.flush()
    out.flush()
    assert scheduled == []


def test_what_was_written_is_sent_by_the_flush_in_order(stream):
    out, sub, session, scheduled = stream
    for _ in range(100):  # until the subscription has reached the PUB socket
        out.write(".")
        out.flush()
        if sub.poll(10):
            break
    texts(sub, session, 200)
    out.write("one ")
    out.write("two")
    out.flush()  # the send is queued on the IOPub thread, before anything published after it
    assert scheduled
    scheduled.clear()
    assert "".join(texts(sub, session)) == "one two"
    out.flush()
    assert scheduled == []


def test_the_sandbox_kernels_history_database_writes_ahead(tmp_path):
    """The launcher's connection class puts IPython's history database in write-ahead-log mode
    with normal syncing (a cell's commit then costs microseconds, not a synced journal), and what
    it commits is there for another connection, as history_request and the next session read it."""
    scope: dict = {}
    exec(launcher.HISTORY_CONNECTION, scope)
    path = tmp_path / "history.sqlite"
    db = sqlite3.connect(path, factory=scope["HistoryConnection"], check_same_thread=False)
    with db:
        db.execute("CREATE TABLE history (session integer, line integer, source text)")
        db.execute("INSERT INTO history VALUES (1, 1, '1+1')")
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert db.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
    assert sqlite3.connect(path).execute("SELECT source FROM history").fetchall() == [("1+1",)]
    db.close()


def test_the_launcher_makes_the_prompt_flush_the_sandbox_kernels_stream():
    source = launcher.IOPUB_APP
    assert "class PromptFlushOutStream(OutStream)" in source
    assert f'outstream_class = DottedObjectName("{launcher.OUTSTREAM_MODULE}.PromptFlushOutStream")' in source
    compile(source, "launch.py", "exec")

"""The sandbox kernel's side of checkpoints: a fork of the kernel's process at a cell boundary,
held by the sandbox's keeper (:mod:`.keeper`) as a copy-on-write snapshot, and promoted to the
running kernel when it is restored. Its source is loaded into the kernel's process by the
launcher (:func:`launcher_prelude`) as the module :data:`MODULE`; standard library only until a
promotion, which builds a fresh ipykernel around the old interpreter.

The host asks for a checkpoint with a silent ``execute_request`` whose ``user_expressions``
call :func:`take` (on the kernel's main thread, between cells). The child of the fork:

- keeps only the forking thread, and waits passively (blocked in ``recv`` on its connection to
  the keeper; no lock another thread may have held is ever taken), in a process group of its
  own (an interrupt of the kernel's group does not reach it), with the kernel's own
  ``oom_score_adj`` lowered back, so the OOM killer takes the running kernel before a snapshot;
- makes its files private at once: an open file description is shared across ``fork``, so a
  later read in the kernel would move the snapshot's offset. Each regular file is opened again
  (same flags, same offset) and put on the same descriptor; a deleted one (sqlite's temporary
  files) is copied. Every other descriptor (the kernel's ZMQ connections, pipes, a network
  socket) is pointed at ``/dev/null``: a snapshot must not hold a connection or a pipe's end
  open for the kernel's peers, nor can it bring one back. The kernel's listening sockets are
  kept: the promoted kernel serves on them (``ZMQ_USE_FD``), so the host's client connects
  again to the same addresses, with the same key, as to the kernel before it.

On ``promote`` the child first forks a copy of itself, which stays as the snapshot (a state can
be restored again), then builds a kernel: ipykernel's app and kernel objects anew (a new ZMQ
context, sockets, threads and event loop) around the old IPython shell, whose namespace,
execution count, history and comms are the state. It serves on the connection file and the
listening sockets the keeper sends with ``promote`` (SCM_RIGHTS): the sandbox's own, or new
ones for a fork beside it.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import socket
import stat
import sys
import time

MODULE = "_sandbox_kernel_checkpoints"
"""The name the kernel's process knows this module by (``sys.modules``)."""
KEEPER_VARIABLE = "SANDBOX_KERNEL_KEEPER"
"""The kernel's environment variable with the path of the keeper's socket."""
LISTEN_VARIABLE = "SANDBOX_KERNEL_LISTEN"
"""The kernel's environment variable with ``{address: fd}`` of its listening sockets (JSON)."""
KERNEL_OOM_ADJ = 500
"""The running kernel's ``oom_score_adj``: the OOM killer takes it before any snapshot (0)."""
COPY_LIMIT = 256 * 1024**2
"""Bytes of one deleted file a snapshot copies at most; a larger one is not kept."""
REGISTER_WAIT_S = 10.0
"""Seconds the kernel waits for its snapshot's registration with the keeper."""

ORIGINAL_FDS: tuple = ()
"""Descriptors of the kernel's stdout and stderr as started (the launcher's dups, taken before
ipykernel's capture): a snapshot's log goes there."""

_children: list = []  # snapshots forked by this process, reaped at the next take()
_base_limit = 0  # the recursion limit before the first promotion


def take(cell=None, name=None) -> str:
    """Take a checkpoint of this process: fork a snapshot and wait until the keeper holds it.

    Args:
        cell: the execution count of the cell whose end this is (None: unknown).
        name: the checkpoint's name, if the user gave one.

    Returns:
        JSON: ``{"id", "pid", "fork_s"}``, or ``{"error": "..."}``.
    """
    path = os.environ.get(KEEPER_VARIABLE)
    if not path:
        return json.dumps({"error": "this sandbox runs no keeper"})
    _reap()
    record = {"op": "snapshot", "cell": cell, "name": name, "time": time.time()}
    return json.dumps(fork_snapshot(path, record))


def configure(min_seconds: float) -> str:
    """Checkpoint this kernel by itself at the end of each cell that ran at least
    ``min_seconds`` (negative: never), before it answers: the fork is the long cell's cost, never
    the next cell's. Through IPython's ``pre_run_cell``/``post_run_cell`` events (not for silent
    executions). Returns ``"ok"``."""
    global _min_seconds
    _min_seconds = float(min_seconds)
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None and not _hooked:
        shell.events.register("pre_run_cell", _cell_begins)
        shell.events.register("post_run_cell", _cell_ended)
        _hooked.append(True)
    return "ok"


_min_seconds = -1.0
_hooked: list = []
_began: list = [0.0]


def _cell_begins(info=None) -> None:
    _began[0] = time.monotonic()


def _cell_ended(result=None) -> None:
    """IPython's ``post_run_cell``: nothing may escape it (IPython would print its traceback in
    the cell's output)."""
    try:
        _checkpoint_cell(result)
    except Exception as exc:  # noqa: BLE001
        _note(f"no checkpoint after this cell: {type(exc).__name__}: {exc}")


def _checkpoint_cell(result) -> None:
    count = getattr(result, "execution_count", None)
    path = os.environ.get(KEEPER_VARIABLE)
    if _min_seconds < 0 or not path or not isinstance(count, int) or time.monotonic() - _began[0] < _min_seconds:
        return
    _reap()
    answer = fork_snapshot(path, {"op": "snapshot", "cell": count, "name": None, "time": time.time()})
    if "error" in answer:
        _note(f"no checkpoint after cell {count}: {answer['error']}")


def _reap() -> None:
    for pid in list(_children):
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                _children.remove(pid)
        except ChildProcessError:
            _children.remove(pid)


def fork_snapshot(path: str, record: dict) -> dict:
    """Fork; the child registers ``record`` with the keeper at ``path`` and waits (never returns);
    the parent returns the keeper's answer with the child's pid and the fork's seconds."""
    started = time.perf_counter()
    try:
        read_end, write_end = os.pipe()
    except OSError as exc:
        return {"error": f"no pipe to the snapshot ({exc.strerror or exc})"}
    try:
        pid = os.fork()
    except OSError as exc:  # EAGAIN at the sandbox's process limit, ENOMEM
        os.close(read_end)
        os.close(write_end)
        return {"error": f"the kernel could not fork ({exc.strerror or exc})"}
    if pid == 0:
        os.close(read_end)
        _snapshot(path, record, write_end)
    elapsed = time.perf_counter() - started
    os.close(write_end)
    _children.append(pid)
    try:
        answer = _read_answer(read_end)
    finally:
        os.close(read_end)
    return {**answer, "pid": pid, "fork_s": round(elapsed, 6), "held_s": round(time.perf_counter() - started, 6)}


def _read_answer(fd: int) -> dict:
    import select

    poll = select.poll()  # not select(): descriptors may be numbered past FD_SETSIZE
    poll.register(fd, select.POLLIN)
    data, deadline = b"", time.monotonic() + REGISTER_WAIT_S
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not poll.poll(left * 1000):
            return {"error": "the snapshot did not register with the keeper in time"}
        chunk = os.read(fd, 4096)
        if not chunk:
            return {"error": "the snapshot ended before the keeper held it"}
        data += chunk
    return json.loads(data.split(b"\n", 1)[0])


def _snapshot(path: str, record: dict, answer_fd: int) -> None:
    """The child of a fork: private files, registered with the keeper, then waiting. Never returns."""
    try:
        gc.disable()  # a collection would touch (and copy) every page of tracked objects
        os.setpgid(0, 0)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _oom_adj(0)
        keeper = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        keeper.connect(path)
        for target, fd in zip((1, 2), ORIGINAL_FDS):
            os.dup2(fd, target)
        private_files({keeper.fileno(), answer_fd, *ORIGINAL_FDS, *listening().values()})
        keeper.sendall(json.dumps({**record, "pid": os.getpid()}).encode() + b"\n")
        lines = _Lines(keeper)
        answer = lines.next()
        os.write(answer_fd, json.dumps(answer if answer is not None else {"error": "the keeper closed"}).encode()
                 + b"\n")
        os.close(answer_fd)
        if answer is None or "error" in answer:
            os._exit(1)
        record = {**record, "id": answer["id"]}
        while (message := lines.next()) is not None:
            if message.get("op") == "promote":
                fds, lines.fds = lines.fds, []
                _promote(path, record, keeper, message, fds)
    except BaseException as exc:  # noqa: BLE001 - nothing may escape a forked child
        _say(f"checkpoint snapshot failed: {type(exc).__name__}: {exc}")
    os._exit(0)


class _Lines:
    """Lines of JSON from a socket, read with plain ``recvmsg`` (blocking); the descriptors that
    came with them (SCM_RIGHTS) are in :attr:`fds`."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock, self._buffer, self.fds = sock, b"", []

    def next(self) -> dict | None:
        """The next message, or None at the end of the stream."""
        while b"\n" not in self._buffer:
            chunk, fds, _, _ = socket.recv_fds(self._sock, 65536, 16)
            self.fds += fds
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)


def _oom_adj(value: int) -> None:
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(value))
    except OSError:
        pass


def _end_with_the_keeper(keeper: socket.socket) -> None:
    """A promoted kernel ends when the keeper does (its connection ends), as the first one does
    by ``PR_SET_PDEATHSIG``; its parent may be another kernel, whose end it must outlive."""
    import threading

    def watch() -> None:
        try:
            while keeper.recv(4096):
                pass
        except OSError:
            pass
        os._exit(0)

    threading.Thread(target=watch, name="sandbox-kernel-keeper-watch", daemon=True).start()


def _frames() -> list:
    frames, frame = [], sys._getframe()
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


def _note(text: str) -> None:
    """One line in the cell's stderr, as the sandbox's other notes: ``[text]``."""
    try:
        sys.stderr.write(f"[{text}]\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - a note must never fail the cell
        pass


def _say(text: str) -> None:
    try:
        os.write(2, f"sandbox-kernel: {text}\n".encode())
    except OSError:
        pass


# -- the snapshot's files ----------------------------------------------------------------------
def private_files(keep: set) -> None:
    """Make this process's descriptors its own (see the module's text): regular files opened
    again at the same offset (deleted ones copied), everything else but ``keep``, 0-2,
    directories and character devices pointed at ``/dev/null``. The kernel machinery's among
    the latter (:func:`_machinery`) are noted in :data:`_spent`, to be closed by a promotion."""
    machinery = _machinery(keep)
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in sorted(int(name) for name in os.listdir("/proc/self/fd")):
            if fd in keep or fd <= 2 or fd == devnull:
                continue
            try:
                mode = os.fstat(fd).st_mode
            except OSError:
                continue  # the listing's own descriptor, closed meanwhile
            if stat.S_ISDIR(mode) or stat.S_ISCHR(mode):
                continue
            inheritable = os.get_inheritable(fd)
            copy = _own_copy(fd) if stat.S_ISREG(mode) else None
            os.dup2(devnull if copy is None else copy, fd, inheritable=inheritable)
            if copy is not None:
                os.close(copy)
            elif fd in machinery:
                _spent.add(fd)
    finally:
        os.close(devnull)


_spent: set = set()  # descriptors of the kernel machinery a promotion closes (see private_files)


_started: dict = {}  # the kernel machinery's descriptors when the kernel had started: {fd: (dev, inode)}


def kernel_started() -> None:
    """Note the descriptors the kernel (ipykernel, libzmq) holds once started (see :func:`_machinery`)."""
    _started.clear()
    for name in os.listdir("/proc/self/fd"):
        try:
            info = os.fstat(int(name))
        except OSError:
            continue
        if int(name) > 2:
            _started[int(name)] = (info.st_dev, info.st_ino)


def _machinery(keep: set) -> set:
    """The descriptors only the kernel machinery uses (libzmq's and ipykernel's, whose code never
    runs again in a snapshot): those it held when it started (:func:`kernel_started`, the same
    file still), event fds and epoll instances (``anon_inode:``), and its ZMQ connections (unix
    sockets bound to one of its listening addresses). A promotion closes them; the others stay on
    ``/dev/null``, since a Python object (a user's socket) may close its number later."""
    addresses = {address[len("ipc://"):] for address in listening()}
    found = set()
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd in keep or fd <= 2:
            continue
        try:
            target, info = os.readlink(f"/proc/self/fd/{fd}"), os.fstat(fd)
            if target.startswith("anon_inode:") or _started.get(fd) == (info.st_dev, info.st_ino):
                found.add(fd)
            elif target.startswith("socket:") and addresses:
                with socket.socket(fileno=os.dup(fd)) as sock:
                    if sock.family == socket.AF_UNIX and sock.getsockname() in addresses:
                        found.add(fd)
        except OSError:
            continue
    return found - set(listening().values())


def _own_copy(fd: int) -> int | None:
    """A new open file description of ``fd``'s file with its flags and offset; a deleted file
    becomes a private copy. None when it cannot be had."""
    try:
        flags = _flags(fd)
        offset = os.lseek(fd, 0, os.SEEK_CUR)
        if os.fstat(fd).st_nlink == 0:
            return _copy_deleted(fd, offset)
        copy = os.open(f"/proc/self/fd/{fd}", flags & ~(os.O_CREAT | os.O_TRUNC | os.O_EXCL | os.O_CLOEXEC))
        os.lseek(copy, offset, os.SEEK_SET)
        return copy
    except OSError:
        return None


def _flags(fd: int) -> int:
    with open(f"/proc/self/fdinfo/{fd}") as f:
        for line in f:
            if line.startswith("flags:"):
                return int(line.split()[1], 8)
    return os.O_RDONLY


def _copy_deleted(fd: int, offset: int) -> int | None:
    if os.fstat(fd).st_size > COPY_LIMIT:
        return None
    source = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)
    try:
        where = os.path.dirname(os.readlink(f"/proc/self/fd/{fd}")) or "/tmp"
        try:
            copy = os.open(where, os.O_TMPFILE | os.O_RDWR, 0o600)
        except OSError:
            copy = os.open("/tmp", os.O_TMPFILE | os.O_RDWR, 0o600)
        position = 0
        while chunk := os.pread(source, 1 << 20, position):
            os.pwrite(copy, chunk, position)
            position += len(chunk)
        os.lseek(copy, offset, os.SEEK_SET)
        return copy
    finally:
        os.close(source)


def listening() -> dict:
    """``{address: fd}`` of the kernel's listening sockets, which the keeper made and passed on
    (:data:`LISTEN_VARIABLE`): every kernel of the sandbox, the first, a promoted one or a fresh
    one, serves on them, so the host's client always finds its kernel at the same addresses."""
    try:
        return {str(address): int(fd) for address, fd in json.loads(os.environ.get(LISTEN_VARIABLE) or "{}").items()}
    except (ValueError, AttributeError):
        return {}


# -- promotion ----------------------------------------------------------------------------------
def _promote(path: str, record: dict, keeper: socket.socket, message: dict, fds: list) -> None:
    """Become the sandbox's kernel (see the module's text), or with ``message["fork"]`` a kernel
    beside it, on the connection file and listening sockets (``fds``) the keeper gave; returns
    only if the kernel ends."""
    copy = fork_snapshot(path, {**record, "replace": True})  # the snapshot stays, for another restore
    if "error" in copy:
        _say(f"the restored checkpoint is not kept: {copy['error']}")
    for fd in _spent:  # the old kernel machinery's (see _machinery); never the kept ones
        try:
            os.close(fd)
        except OSError:
            pass
    _spent.clear()
    global _base_limit
    _base_limit = _base_limit or sys.getrecursionlimit()
    sys.setrecursionlimit(_base_limit + len(_frames()))  # this kernel runs inside the old one's calls
    gc.enable()
    _oom_adj(KERNEL_OOM_ADJ)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for fd in set(listening().values()) - set(fds):  # the sockets it served on before are the keeper's to give
        try:
            os.close(fd)
        except OSError:
            pass
    os.environ[LISTEN_VARIABLE] = json.dumps(dict(zip(message.get("listen") or [], fds)))
    app = build_kernel(message.get("connection_file"))
    _end_with_the_keeper(keeper)
    keeper.sendall(json.dumps({"op": "bound", "pid": os.getpid()}).encode() + b"\n")
    try:
        app.start()
    finally:
        _end(app)


def build_kernel(connection_file: str | None = None):
    """A new ipykernel app (the class that started this process) around this process's IPython
    shell, initialized on the kernel's old connection file (or ``connection_file``, a fork's),
    serving on the keeper's sockets."""
    import asyncio
    import atexit
    import threading

    import zmq
    from ipykernel.kernelapp import IPKernelApp
    from IPython.core.interactiveshell import InteractiveShell

    old_app, shell = IPKernelApp.instance(), InteractiveShell.instance()
    argv, app_class, kernel_class = list(old_app.argv), type(old_app), type(shell.kernel)
    if connection_file is not None:
        argv = [a for i, a in enumerate(argv) if a != "-f" and (i == 0 or argv[i - 1] != "-f")]
        argv = ["-f", connection_file, *argv]
    sys.stdout, sys.stderr, sys.displayhook = sys.__stdout__, sys.__stderr__, sys.__displayhook__
    atexit._clear()  # the old app's: they would close what the new one uses
    asyncio.events._set_running_loop(None)  # this thread is inside the old loop's run, for good
    asyncio.set_event_loop(asyncio.new_event_loop())
    serve_on_inherited(zmq)
    for cls in (app_class, kernel_class):
        cls.clear_instance()
    history = shell.history_manager
    history.db_input_cache_lock, history.db_output_cache_lock = threading.Lock(), threading.Lock()

    class Promoted(app_class):
        def init_code(self):
            """The startup code ran in the first kernel; its effects are part of the state."""

        def init_poller(self):
            """None: this kernel ends with the keeper's connection (its parent may be init,
            where a sandbox cannot make the keeper a subreaper: gVisor)."""

    app = Promoted.instance()
    app.initialize(argv)
    kernel_started()
    _adopt(shell, app.kernel)
    _history_of_its_own(history)
    return app


def _history_of_its_own(history) -> None:
    """IPython's history after a fork: an in-memory database is this process's own copy and
    goes on in a new session (the old one has lines numbered past this state's count). A file's
    connection is not usable after a fork (SQLite's locks are per process, its lock state is the
    old process's: "database is locked"), so the history goes on in memory."""
    if not history.enabled:
        return
    history.save_thread = None  # the old process's thread; none in this one
    if history.hist_file != ":memory:":
        _stale.append(history.db)  # never closed: closing could release this process's new locks
        history.hist_file = ":memory:"
        history.init_db()
        history.using_thread = False
    history.new_session()


_stale: list = []


def serve_on_inherited(zmq) -> None:
    """Bind this process's ZMQ sockets for the kernel's addresses to the listening sockets the
    keeper made (:func:`listening`), with ``ZMQ_USE_FD``, instead of new ones."""
    sockets = listening()
    bind = getattr(zmq.Socket.bind, "__wrapped__", zmq.Socket.bind)

    def bind_on_inherited(self, addr):
        fd = sockets.pop(addr, None)
        if fd is not None:
            self.setsockopt(zmq.USE_FD, fd)
        return bind(self, addr)

    bind_on_inherited.__wrapped__ = bind
    zmq.Socket.bind = bind_on_inherited


def _adopt(shell, kernel) -> None:
    """Point what the old shell and its comms hold of the old kernel at the new one."""
    shell.kernel = kernel
    manager = getattr(kernel, "comm_manager", None)
    for comm in list(getattr(manager, "comms", {}).values()):
        if hasattr(comm, "kernel"):
            comm.kernel = kernel


def _end(app) -> None:
    import atexit

    try:
        atexit._run_exitfuncs()
    finally:
        os._exit(0)


def launcher_prelude() -> str:
    """Python source for the kernel's launcher, run before ipykernel starts: loads this module as
    :data:`MODULE`, keeps the original stdout and stderr, and, under a keeper, raises the kernel's
    ``oom_score_adj``."""
    return (f"import sys as _s, types as _t, os as _o\n"
            f"_m = _t.ModuleType({MODULE!r})\n"
            f"exec(compile({SOURCE!r}, 'sandbox-kernel-checkpoints', 'exec'), _m.__dict__)\n"
            f"_s.modules[{MODULE!r}] = _m\n"
            f"if _o.environ.get({KEEPER_VARIABLE!r}):\n"
            f"    import zmq as _z\n"
            f"    _m.ORIGINAL_FDS = (_o.dup(1), _o.dup(2))\n"
            f"    _m._oom_adj(_m.KERNEL_OOM_ADJ)\n"
            f"    _m.serve_on_inherited(_z)\n"
            f"    del _z\n"
            f"del _s, _t, _o, _m\n")


SOURCE = open(__file__).read() if __name__ != MODULE else ""
"""This module's source, as the kernel's process runs it."""

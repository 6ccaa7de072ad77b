"""The sandbox's keeper: the parent process of the sandbox's kernel, which holds its checkpoints.

Runs inside the sandbox (standard library only, any Python 3.8+), as
``python keeper.py SOCKET CONNECTION_FILE [--stdin] -- KERNEL_ARGV...``. It makes the kernel's
listening sockets (the connection file's ``ipc`` addresses) and passes them to every kernel it
runs (``SANDBOX_KERNEL_LISTEN``: the first, a promoted checkpoint, a fresh one), so the host's
client always finds its kernel at the same addresses, with the same key. It is a child subreaper
(``PR_SET_CHILD_SUBREAPER``), so the snapshots the kernel forks (:mod:`.inside`) become its
children when the kernel dies, and it outlives the kernel: the sandbox keeps running and its
checkpoints with it. It listens on a unix socket (mode 0600) and speaks lines of JSON:

- a snapshot registers with ``{"op": "snapshot", "cell", "name", "time", "pid"}`` (or ``"id"`` and
  ``"replace": true`` for the copy a promotion leaves), is answered ``{"id": N}``, and then waits
  for ``{"op": "promote"}``; the keeper closes its connection to drop it.
- the host says ``{"op": "hello", "seq", "keep", "max_bytes", "recover"}`` and may then ask
  ``list``, ``restore`` (``"id"``), ``fresh`` (a new interpreter; the checkpoints stay), ``drop``
  (``"id"``) and ``bounds``; each answer carries the request's ``seq``. Events come unasked:
  ``{"op": "died", "status", "restored": CHECKPOINT or null}``.

When the kernel is killed by a signal (the OOM killer, a crash, a kill) and ``recover`` is on,
the newest snapshot is promoted in its place and the host is told; with no snapshot the keeper
exits with the kernel's status (128 + N for a signal N), so the sandbox ends as it did without
one. A kernel that exits by itself (a shutdown, ``os._exit(N)``: what its code asked for) ends
the keeper too, with its status. The keeper ends, killing the kernel, every snapshot and every
other process of its tree and waiting until they are gone (reaped), when
its parent changes (the relay or host process that started it is gone), on SIGTERM, and with
``--stdin`` when its standard input ends (the engine's attach of the host process); a pooled
sandbox's stdin must say a byte within ``SANDBOX_KERNEL_POOL_TTL`` seconds.

Bounds: at most ``keep`` snapshots and ``max_bytes`` of their private memory (what dropping them
would free, ``Private_*`` of ``/proc/PID/smaps_rollup``), measured at each new snapshot and every
:data:`MEASURE_S` seconds; the oldest unnamed go first, then the oldest named; never the newest.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time

KEEPER_VARIABLE = "SANDBOX_KERNEL_KEEPER"
LISTEN_VARIABLE = "SANDBOX_KERNEL_LISTEN"
PORTS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
POOL_TTL_VARIABLE = "SANDBOX_KERNEL_POOL_TTL"
MEASURE_S = 2.0
"""Seconds between measures of the snapshots' memory (and checks of the parent)."""
PRESSURE_S = 0.1
"""Seconds between looks at the sandbox's memory, while it holds snapshots and has a limit."""
PRESSURE = 0.85
"""Past this share of its memory limit the sandbox drops its oldest snapshot (never the newest),
one per look, so the kernel gets the memory before the OOM killer acts."""
PROMOTE_WAIT_S = 30.0
"""Seconds a snapshot has to bind its kernel's sockets once promoted."""
STOP_WAIT_S = 1.5
"""Seconds the kernel gets to end after SIGTERM before SIGKILL, when the keeper ends."""
REAP_WAIT_S = 5.0
"""Seconds the keeper, ending, waits for the processes it killed to be gone (reaped) before it
exits anyway."""


class Conn:
    """One connection to the keeper's socket, and the lines read from it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.buffer, self.role = sock, b"", ""

    def send(self, message: dict, fds: list = ()) -> None:
        """Send one line (with descriptors ``fds``, SCM_RIGHTS); a peer gone is no error here."""
        data = json.dumps(message).encode() + b"\n"
        try:
            self.sock.setblocking(True)
            if fds:
                sent = socket.send_fds(self.sock, [data], list(fds))
                data = data[sent:]
            self.sock.sendall(data)
            self.sock.setblocking(False)
        except OSError:
            pass

    def lines(self) -> list | None:
        """The complete lines read now, or None when the peer is gone."""
        try:
            chunk = self.sock.recv(65536)
        except BlockingIOError:
            return []
        except OSError:
            return None
        if not chunk:
            return None
        self.buffer += chunk
        *complete, self.buffer = self.buffer.split(b"\n")
        messages = []
        for line in complete:
            try:
                message = json.loads(line)
            except ValueError:
                return None
            if isinstance(message, dict):
                messages.append(message)
        return messages


class Keeper:
    """See the module's text."""

    def __init__(self, path: str, connection_file: str, argv: list, watch_stdin: bool = False) -> None:
        self.path, self.connection_file, self.argv, self.watch_stdin = path, connection_file, argv, watch_stdin
        self.listening: dict = {}  # the kernel's sockets: {address: fd}
        self.selector = selectors.DefaultSelector()
        self.snapshots: dict = {}  # id -> {"id", "cell", "name", "time", "pid", "conn"}
        self.next_id = 1
        self.hosts: list = []
        self.keep, self.max_bytes, self.recover = 0, 0, True
        self.kernel_pid, self.kernel_conn = 0, None
        self.oom_kills: int | None = None  # the OOM killer's count when the kernel started
        self.pending: dict | None = None  # a replacement of the kernel under way
        self.forks: dict = {}  # kernels forked from checkpoints beside the kernel: n -> {"pid", "conn"}
        self.forking: dict | None = None  # a fork under way
        self.next_fork = 1
        self.parent, self.stopping, self.measure_soon = os.getppid(), False, False
        self.ttl = float(os.environ.pop(POOL_TTL_VARIABLE, "") or 0)
        self.claimed = not self.ttl

    # -- start and end ----------------------------------------------------------------------
    def run(self) -> None:
        _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphaned snapshots become ours
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(self.path):
            os.unlink(self.path)
        self.listener.bind(self.path)
        os.chmod(self.path, 0o600)
        self.listener.listen(64)
        self.listener.setblocking(False)
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.selector.register(wake_read, selectors.EVENT_READ, "wake")
        if self.watch_stdin:
            self.selector.register(0, selectors.EVENT_READ, "stdin")
        self.started = time.monotonic()
        self.listen()
        self.spawn()
        self.loop()

    def listen(self) -> None:
        """Make the kernel's listening sockets (an ``ipc`` connection only; libzmq's ipc
        listener is a unix stream socket, taken over with ``ZMQ_USE_FD``)."""
        with open(self.connection_file) as f:
            info = json.load(f)
        if info.get("transport") == "ipc":
            self.listening = _listen(info)

    def spawn(self) -> None:
        env = dict(os.environ, JPY_PARENT_PID=str(os.getpid()))  # ipykernel ends when its parent changes
        env[KEEPER_VARIABLE] = self.path
        env[LISTEN_VARIABLE] = json.dumps(self.listening)
        kernel = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                  pass_fds=tuple(self.listening.values()),
                                  preexec_fn=lambda: _prctl(1, signal.SIGKILL))  # PR_SET_PDEATHSIG
        self.kernel_pid, self.kernel_conn = kernel.pid, None
        kernel.returncode = 0  # reaped by our own waitpid, never by Popen's
        self.oom_kills = _oom_kills()

    def end(self, code: int) -> None:
        """Kill the kernel, every snapshot and fork and every other process of the sandbox's tree
        (:func:`_reap_all`), wait until they are gone, and exit with ``code``: when the keeper has
        ended, nothing it started runs on (the host waits for the keeper, and then for nothing else)."""
        if self.kernel_pid:
            _kill_group(self.kernel_pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_WAIT_S
            while time.monotonic() < deadline and _alive(self.kernel_pid):
                time.sleep(0.02)
            _kill_group(self.kernel_pid, signal.SIGKILL)
        for process in [*self.snapshots.values(), *self.forks.values()]:
            _kill_group(process["pid"], signal.SIGKILL)
        _reap_all(time.monotonic() + REAP_WAIT_S)
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os._exit(code)

    # -- the loop -----------------------------------------------------------------------------
    def loop(self) -> None:
        measured = looked = time.monotonic()
        while True:
            if self.stopping:
                self.end(143)
            for key, _ in self.selector.select(timeout=PRESSURE_S if len(self.snapshots) > 1 else 0.5):
                getattr(self, f"on_{key.data}" if isinstance(key.data, str) else "on_conn")(key)
            now = time.monotonic()
            if not self.claimed and now - self.started > self.ttl:
                self.end(0)  # a pooled sandbox nobody took
            if self.pending and now > self.pending["deadline"]:
                self.replaced(None, "the checkpoint did not become a kernel in time")
            if self.forking and now > self.forking["deadline"]:
                self.forked(None, "the checkpoint did not become a kernel in time")
            if len(self.snapshots) > 1 and now - looked >= PRESSURE_S:
                looked = now
                self.relieve()
            if self.measure_soon or now - measured > MEASURE_S:
                measured, self.measure_soon = now, False
                if os.getppid() != self.parent:
                    self.end(0)  # whoever started us is gone
                self.bound()

    def on_accept(self, key) -> None:
        try:
            sock, _ = self.listener.accept()
        except OSError:
            return
        sock.setblocking(False)
        self.selector.register(sock, selectors.EVENT_READ, Conn(sock))

    def on_wake(self, key) -> None:
        try:
            os.read(key.fd, 4096)
        except OSError:
            pass
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if not pid:
                return
            self.reaped(pid, os.waitstatus_to_exitcode(status))

    def on_stdin(self, key) -> None:
        try:
            data = os.read(0, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.end(0)  # the host process is gone
        self.claimed = True

    def on_conn(self, key) -> None:
        conn = key.data
        messages = conn.lines()
        if messages is None:
            self.release(conn)
            self.gone(conn)
            return
        for message in messages:
            handler = getattr(self, "do_" + str(message.get("op")), None)
            if handler is None:
                conn.send({"op": "error", "seq": message.get("seq"), "error": f"unknown op {message.get('op')!r}"})
            else:
                handler(conn, message)

    # -- children -----------------------------------------------------------------------------
    def reaped(self, pid: int, status: int) -> None:
        if pid == self.kernel_pid:
            self.kernel_pid, self.kernel_conn = 0, None
            self.kernel_ended(status)
            return
        for ident, snapshot in list(self.snapshots.items()):
            if snapshot["pid"] == pid:
                self.forget(ident)

    def kernel_ended(self, status: int) -> None:
        pending = self.pending
        if pending is not None and pending.get("killed"):
            pending["killed"] = False
            self.replace_now()
            return
        if pending is not None:  # the kernel died while becoming one
            self.replaced(None, f"the restored kernel ended with status {status}")
            return
        kills = _oom_kills()
        oom = None if kills is None or self.oom_kills is None else kills > self.oom_kills
        self.oom_kills = kills  # the next kernel's deaths count from here
        if (status is not None and status >= 0) or not self.recover or not self.snapshots:  # it exited by itself
            self.tell({"op": "died", "status": status, "oom": oom, "restored": None})
            self.end(1 if status is None else 128 - status if status < 0 else status)
        newest = max(self.snapshots.values(), key=lambda s: (s["time"], s["id"]))
        if oom:  # the memory the older ones hold is what the next try of the cell needs
            for older in [s for s in self._ordered() if s["id"] != newest["id"] and not s["name"]]:
                self.forget(older["id"])
        self.pending = {"op": "recover", "status": status, "oom": oom, "id": newest["id"], "conn": None, "seq": None,
                        "killed": False, "deadline": time.monotonic() + PROMOTE_WAIT_S}
        self.replace_now()

    def replace_now(self) -> None:
        """The old kernel is gone: promote the pending checkpoint, or start a fresh kernel."""
        pending = self.pending
        if pending["op"] == "fresh":
            self.pending = None
            self.spawn()
            pending["conn"].send({"op": "fresh", "seq": pending["seq"], "pid": self.kernel_pid})
            return
        snapshot = self.snapshots.get(pending["id"])
        if snapshot is None:
            self.replaced(None, f"checkpoint {pending['id']} is gone")
            return
        pending["deadline"] = time.monotonic() + PROMOTE_WAIT_S
        pending["promoting"] = snapshot["conn"]
        snapshot["conn"].send({"op": "promote", "connection_file": self.connection_file, "listen": list(self.listening)},
                              list(self.listening.values()))  # its own sockets may be a fork's

    def replaced(self, conn, error: str | None) -> None:
        """A promotion ended: ``conn`` is the new kernel's connection (None: it failed)."""
        pending, self.pending = self.pending, None
        snapshot = self.snapshots.get(pending["id"])
        restored = pending.get("kept") or (_public(snapshot) if snapshot is not None else None)
        restored = restored if conn is not None else None
        if pending["op"] == "recover":
            if restored is None:
                self.forget(pending["id"])
                self.kernel_ended(pending["status"])  # the next older one, or the end
                return
            self.tell({"op": "died", "status": pending["status"], "oom": pending["oom"], "restored": restored})
        elif restored is None:
            self.spawn()  # the host asked for a state it cannot have: a fresh interpreter
            pending["conn"].send({"op": "error", "seq": pending["seq"], "error": error, "fresh": True})
        else:
            pending["conn"].send({"op": "restored", "seq": pending["seq"], **restored})

    def gone(self, conn: Conn) -> None:
        if conn in self.hosts:
            self.hosts.remove(conn)
        if conn is self.kernel_conn and self.kernel_pid and not _is_child(self.kernel_pid):
            self.kernel_pid, self.kernel_conn = 0, None  # a promoted kernel no SIGCHLD tells of (no subreaper)
            self.kernel_ended(None)
        if self.pending and self.pending.get("promoting") is conn:
            self.replaced(None, "the checkpoint could not become a kernel")
        if self.forking and self.forking["promoting"] is conn:
            self.forked(None, "the checkpoint could not become a kernel")
        for n, fork in list(self.forks.items()):
            if fork["conn"] is conn:
                del self.forks[n]
                self.tell({"op": "fork_died", "fork": n})
        for ident, snapshot in list(self.snapshots.items()):
            if snapshot["conn"] is conn:
                self.forget(ident)

    def forget(self, ident: int) -> None:
        """Drop snapshot ``ident``: killed first (its pid is not reused while unreaped), then closed."""
        snapshot = self.snapshots.pop(ident, None)
        if snapshot is None:
            return
        _kill(snapshot["pid"], signal.SIGKILL)
        self.release(snapshot["conn"])

    def release(self, conn: Conn) -> None:
        """Stop watching ``conn`` (if it is watched) and close its socket."""
        try:
            self.selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()

    def tell(self, event: dict) -> None:
        for host in self.hosts:
            host.send(event)

    # -- messages -------------------------------------------------------------------------------
    def do_snapshot(self, conn: Conn, message: dict) -> None:
        conn.role = "snapshot"
        record = {key: message.get(key) for key in ("cell", "name", "time", "pid")}
        if message.get("replace") and message.get("id") in self.snapshots:
            old = self.snapshots[message["id"]]
            record.update(id=old["id"], cell=old["cell"], name=old["name"], time=old["time"])
        else:
            record["id"], self.next_id = self.next_id, self.next_id + 1
            if record["name"]:  # a name names one checkpoint: the newest
                for ident, other in list(self.snapshots.items()):
                    if other["name"] == record["name"]:
                        self.forget(ident)
        self.snapshots[record["id"]] = {**record, "conn": conn}
        conn.send({"id": record["id"]})
        self.measure_soon = True  # after the kernel has its answer

    def do_bound(self, conn: Conn, message: dict) -> None:
        if self.forking and self.forking["promoting"] is conn:
            conn.role = "fork"
            self.forks[self.forking["n"]] = {"pid": int(message.get("pid") or 0), "conn": conn}
            self.forked(conn, None)
            return
        if self.pending and self.pending.get("promoting") is conn:
            self.kernel_pid, self.kernel_conn = int(message.get("pid") or 0), conn
            conn.role = "kernel"
            snapshot = self.snapshots.get(self.pending["id"])
            if snapshot is not None and snapshot["conn"] is conn:  # its copy did not register: it is
                self.snapshots.pop(self.pending["id"])  # the kernel now, and no longer a checkpoint
                self.pending["kept"] = _public(snapshot)
            self.replaced(conn, None)

    def do_hello(self, conn: Conn, message: dict) -> None:
        conn.role = "host"
        if conn not in self.hosts:
            self.hosts.append(conn)
        self.do_bounds(conn, message)

    def do_bounds(self, conn: Conn, message: dict) -> None:
        self.keep = int(message.get("keep") or 0)
        self.max_bytes = int(message.get("max_bytes") or 0)
        self.recover = bool(message.get("recover", True))
        self.do_list(conn, message)  # applies the new bounds before it answers

    def do_list(self, conn: Conn, message: dict) -> None:
        measure = message.get("measure", True) is not False
        # what is listed is what the bounds leave now, not at the loop's next turn (a snapshot just
        # taken may be one past `keep` until then; the bytes only where measuring is asked for)
        if measure and len(self.snapshots) > 1:
            self.relieve()
        measured = self.bound(by_bytes=measure)
        conn.send({"op": "list", "seq": message.get("seq"), "kernel": self.kernel_pid,
                   "checkpoints": [_public(s, measured if measure else None) for s in self._ordered()]})

    def do_restore(self, conn: Conn, message: dict) -> None:
        if self.pending is not None or message.get("id") not in self.snapshots:
            why = "a restore is under way" if self.pending else f"no checkpoint {message.get('id')}"
            conn.send({"op": "error", "seq": message.get("seq"), "error": why})
            return
        self.pending = {"op": "restore", "id": message["id"], "conn": conn, "seq": message.get("seq"),
                        "killed": True, "deadline": time.monotonic() + PROMOTE_WAIT_S}
        self.kill_kernel()

    def do_fresh(self, conn: Conn, message: dict) -> None:
        if self.pending is not None:
            conn.send({"op": "error", "seq": message.get("seq"), "error": "a restore is under way"})
            return
        self.pending = {"op": "fresh", "conn": conn, "seq": message.get("seq"), "killed": True,
                        "deadline": time.monotonic() + PROMOTE_WAIT_S}
        self.kill_kernel()

    def kill_kernel(self) -> None:
        if self.kernel_pid and _is_child(self.kernel_pid):
            _kill_group(self.kernel_pid, signal.SIGKILL)  # SIGCHLD then goes on (kernel_ended)
            return
        if self.kernel_pid:  # not our child (no subreaper): wait for it to be gone
            _kill_group(self.kernel_pid, signal.SIGKILL)
            deadline = time.monotonic() + 2
            while _alive(self.kernel_pid) and time.monotonic() < deadline:
                time.sleep(0.01)
        self.kernel_pid = 0
        self.pending["killed"] = False
        self.replace_now()

    # -- forks: a checkpoint made a kernel beside the kernel, on sockets of its own --------------
    def do_fork(self, conn: Conn, message: dict) -> None:
        snapshot = self.snapshots.get(message.get("id"))
        if snapshot is None or self.forking is not None or self.pending is not None:
            why = f"no checkpoint {message.get('id')}" if snapshot is None else "a restore or fork is under way"
            conn.send({"op": "error", "seq": message.get("seq"), "error": why})
            return
        n, self.next_fork = self.next_fork, self.next_fork + 1
        folder = str(message.get("dir") or os.path.dirname(self.path))
        os.makedirs(folder, mode=0o700, exist_ok=True)
        with open(self.connection_file) as f:
            info = dict(json.load(f), ip=f"{folder}/f{n}")
        path = f"{folder}/f{n}.json"
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            json.dump(info, f)
        sockets = _listen(info)
        self.forking = {"n": n, "conn": conn, "seq": message.get("seq"), "promoting": snapshot["conn"], "file": path,
                        "ip": info["ip"], "deadline": time.monotonic() + PROMOTE_WAIT_S}
        snapshot["conn"].send({"op": "promote", "fork": n, "connection_file": path, "listen": list(sockets)},
                              list(sockets.values()))
        for fd in sockets.values():  # the fork holds them now
            os.close(fd)

    def forked(self, conn, error: str | None) -> None:
        forking, self.forking = self.forking, None
        if conn is None:
            forking["conn"].send({"op": "error", "seq": forking["seq"], "error": error})
        else:
            forking["conn"].send({"op": "forked", "seq": forking["seq"], "fork": forking["n"],
                                  "pid": self.forks[forking["n"]]["pid"], "connection_file": forking["file"],
                                  "ip": forking["ip"]})

    def do_end_fork(self, conn: Conn, message: dict) -> None:
        fork = self.forks.pop(message.get("fork"), None)
        if fork is not None:
            _kill_group(fork["pid"], signal.SIGKILL)
            self.release(fork["conn"])
        conn.send({"op": "ended", "seq": message.get("seq"), "found": fork is not None})

    def do_drop(self, conn: Conn, message: dict) -> None:
        found = message.get("id") in self.snapshots
        self.forget(message.get("id"))
        conn.send({"op": "dropped", "seq": message.get("seq"), "found": found})

    # -- bounds ---------------------------------------------------------------------------------
    def relieve(self) -> None:
        """Under memory pressure (:data:`PRESSURE`), drop the oldest snapshot but the newest."""
        used, limit = _memory()
        if limit and used > PRESSURE * limit:
            ordered = [s for s in self._ordered() if s["id"] != (self.pending or {}).get("id")]
            victims = [s for s in ordered[:-1] if not s["name"]] or [s for s in ordered[:-1]]
            if victims:
                self.forget(victims[0]["id"])
                self.tell({"op": "dropped", "reason": "memory", "id": victims[0]["id"]})

    def _ordered(self) -> list:
        return sorted(self.snapshots.values(), key=lambda s: (s["time"], s["id"]))

    def bound(self, by_bytes: bool = True) -> dict:
        """Drop snapshots past ``keep`` and, ``by_bytes``, ``max_bytes`` (see the module's text).
        Returns what it measured, ``{id: bytes or None}`` (empty unless ``by_bytes``)."""
        if not self.snapshots:
            return {}
        measured = {s["id"]: _private_bytes(s["pid"]) for s in self.snapshots.values()} if by_bytes else {}
        newest = self._ordered()[-1]["id"]
        victims = [s["id"] for s in self._ordered() if not s["name"]] + \
                  [s["id"] for s in self._ordered() if s["name"]]
        for ident in victims:
            over_count = self.keep and len(self.snapshots) > self.keep
            over_bytes = by_bytes and self.max_bytes and \
                sum(measured.get(i) or 0 for i in self.snapshots) > self.max_bytes
            if not (over_count or over_bytes):
                break
            if ident != newest and ident != (self.pending or {}).get("id"):
                self.forget(ident)
        return measured


def _listen(info: dict) -> dict:
    """Listening unix sockets for the ``ipc`` connection ``info``'s ports: ``{address: fd}``."""
    made = {}
    for port in PORTS:
        address = "%s-%s" % (info["ip"], info[port])
        if os.path.exists(address):
            os.unlink(address)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(address)
        sock.listen(128)
        sock.set_inheritable(True)
        made["ipc://" + address] = sock.detach()
    return made


def _public(snapshot: dict, measured: dict | None = None) -> dict:
    """What the host is told of ``snapshot``; with ``measured`` (:meth:`Keeper.bound`'s answer),
    its ``bytes`` too."""
    shown = {key: snapshot[key] for key in ("id", "cell", "name", "time")}
    if measured is not None:
        shown["bytes"] = measured.get(snapshot["id"])
    return shown


def _private_bytes(pid: int) -> int | None:
    """The memory only this process holds (``Private_Clean`` + ``Private_Dirty``), in bytes; None
    where the sandbox's kernel does not say (gVisor has no ``smaps``)."""
    for name in ("smaps_rollup", "smaps"):
        total, found = 0, False
        try:
            with open(f"/proc/{pid}/{name}") as f:
                for line in f:
                    if line.startswith(("Private_Clean:", "Private_Dirty:")):
                        total, found = total + int(line.split()[1]) * 1024, True
        except (OSError, ValueError, IndexError):
            continue
        if found:
            return total
    return None


def _cgroup_file(v1: str, v2: str) -> str | None:
    """The path of this process's memory cgroup's file (``v1`` under cgroup v1, ``v2`` under v2):
    its own cgroup's path, else the root of what it sees (a container's own cgroup)."""
    places = []
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if controllers == "":
                    places.append(f"/sys/fs/cgroup{path}/{v2}")
                elif "memory" in controllers.split(","):
                    places.append(f"/sys/fs/cgroup/memory{path}/{v1}")
    except (OSError, ValueError):
        pass
    places += [f"/sys/fs/cgroup/memory/{v1}", f"/sys/fs/cgroup/{v2}"]
    return next((place for place in places if os.path.exists(place)), None)


_MEMORY_FILES: dict = {}


def _memory() -> tuple:
    """``(used, limit)`` bytes of this process's memory cgroup: its usage less the inactive file
    cache (as ``docker stats``); limit 0 when it has none (or it is the machine's)."""
    if not _MEMORY_FILES:
        _MEMORY_FILES.update(usage=_cgroup_file("memory.usage_in_bytes", "memory.current"),
                             limit=_cgroup_file("memory.limit_in_bytes", "memory.max"),
                             stat=_cgroup_file("memory.stat", "memory.stat"))
    try:
        with open(_MEMORY_FILES["limit"]) as f:
            text = f.read().strip()
        limit = 0 if text == "max" or int(text) >= 1 << 60 else int(text)
        if not limit:
            return 0, 0
        with open(_MEMORY_FILES["usage"]) as f:
            used = int(f.read())
        with open(_MEMORY_FILES["stat"]) as f:
            for line in f:
                if line.startswith(("total_inactive_file ", "inactive_file ")):
                    used -= int(line.split()[1])
                    break
        return used, limit
    except (OSError, ValueError, TypeError):
        return 0, 0


def _oom_kills() -> int | None:
    """How many processes the OOM killer took in this process's memory cgroup so far (cgroup v1
    ``memory.oom_control`` or v2 ``memory.events``: ``oom_kill``), or None where unknown."""
    try:
        with open(_cgroup_file("memory.oom_control", "memory.events") or "") as f:
            for line in f:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _prctl(option: int, value: int) -> bool:
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - no ctypes, no prctl: the keeper works with less
        return False


def _is_child(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1]) == os.getpid()
    except (OSError, ValueError, IndexError):
        return False


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _children() -> list:
    """The pids of this process's children (``/proc/PID/stat``'s parent field), zombies included."""
    mine, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == mine:
                        found.append(int(name))
            except (OSError, ValueError, IndexError):
                continue
    return found


def _reap_all(deadline: float) -> None:
    """SIGKILL every child and reap it, until none is left or ``deadline`` (``time.monotonic()``)
    passed. As the keeper is a child subreaper, what a killed process started (a checkpoint of a
    dead kernel, a subprocess in a session of its own) becomes its child in turn, and is killed in
    the next round: the whole tree ends."""
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return  # none left
        if time.monotonic() > deadline:
            return
        for pid in _children():
            _kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except OSError:
        _kill(pid, sig)


def main(argv: list) -> None:
    watch_stdin = "--stdin" in argv[: argv.index("--")]
    Keeper(argv[0], argv[1], argv[argv.index("--") + 1:], watch_stdin=watch_stdin).run()


SOURCE = open(__file__).read() if __name__ != "__main__" else ""
"""This file's source, as the sandbox runs it (``python keeper.py ...``)."""

if __name__ == "__main__":
    main(sys.argv[1:])

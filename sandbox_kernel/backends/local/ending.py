"""The end of a local sandbox that runs a keeper (:mod:`..checkpoint.keeper`): nothing of it runs on.

The kernel and its checkpoints are in sessions of their own (the kernel's, and one per checkpoint:
:mod:`..checkpoint.inside`), so a signal to the keeper's process group does not reach them, and
they end on their own a moment after the keeper (``PR_SET_PDEATHSIG``, their socket to it
closed): after a SIGKILL of the keeper, the host's close returned while they still ran (measured
under load: two left). So the keeper is asked to end (SIGTERM): it kills them all, reaps them and
exits; only if it has not within :data:`KEEPER_END_S` does the host SIGKILL what it finds of the
tree and wait for each process to be gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

from ..checkpoint.keeper import REAP_WAIT_S, STOP_WAIT_S

KEEPER_END_S = STOP_WAIT_S + REAP_WAIT_S + 2.0
"""Seconds the keeper has to end (its kernel's SIGTERM grace, its reaping, and a margin)."""
GONE_WAIT_S = 5.0
"""Seconds to wait, after SIGKILL, for each process of the tree to be gone."""


def end_keeper(proc: subprocess.Popen, bwrap: bool) -> None:
    """End the keeper ``proc`` (or, with ``bwrap``, the keeper that is bubblewrap's child) and
    everything it started; return once they are all gone (or :data:`GONE_WAIT_S` passed after
    the SIGKILL of the last resort). Blocking."""
    if proc.poll() is not None:
        return  # the keeper ended by itself, and reaped its tree first
    tree = descendants(proc.pid)
    keeper = tree[0] if bwrap and tree else proc.pid
    _signal(keeper, signal.SIGTERM)
    try:
        proc.wait(KEEPER_END_S)
        return
    except subprocess.TimeoutExpired:
        pass
    tree = [proc.pid, *tree, *descendants(proc.pid)]
    for pid in tree:
        _signal(pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + GONE_WAIT_S
    while any(os.path.exists(f"/proc/{pid}") for pid in tree) and time.monotonic() < deadline:
        time.sleep(0.01)


def descendants(pid: int) -> list[int]:
    """The pids of ``pid``'s descendants, children first (``/proc/PID/task/TID/children``). Linux."""
    found, queue = [], [pid]
    while queue:
        parent = queue.pop(0)
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as f:
                    children = [int(child) for child in f.read().split()]
            except (OSError, ValueError):
                continue
            found += children
            queue += children
    return found


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass

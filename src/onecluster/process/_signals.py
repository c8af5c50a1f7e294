"""Signals by PID and by process group, waiting for processes to end, and the stop of a set
of processes: the signal, a grace period, then SIGKILL.

A PID is signalled only while it is live, and a group only while it has live members, so a
PID or group id that the kernel has handed to someone else since is never hit.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable

from onecluster.process._proc import alive, descendants, group_members, leads_group

__all__ = ["exit_code_of", "signal_group", "signal_pid", "stop_pids", "wait_gone"]

#: How long SIGKILLed processes get to be gone (one stuck in the kernel may take a moment).
SETTLE_S = 5.0
_POLL_S = 0.02


def exit_code_of(returncode: int) -> int:
    """A Popen return code as a shell reports it: killed by signal N → ``128 + N``."""
    return 128 - returncode if returncode < 0 else returncode


def signal_pid(pid: int, sig: int) -> bool:
    """Send ``sig`` to ``pid``; False when it no longer exists or is not ours to signal."""
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to every process of group ``pgid``; False when the group no longer exists
    or is not ours (its id was reused by another user's processes): it is left alone."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def wait_gone(pids: Iterable[int], timeout_s: float) -> list[int]:
    """Wait up to ``timeout_s`` until none of ``pids`` is alive; those still alive."""
    waiting = list(pids)
    deadline = time.monotonic() + max(0.0, timeout_s)
    while True:
        waiting = [pid for pid in waiting if alive(pid)]
        if not waiting or time.monotonic() >= deadline:
            return waiting
        time.sleep(_POLL_S)


def stop_pids(
    pids: Iterable[int],
    *,
    grace_s: float,
    sig: int = signal.SIGTERM,
    groups: bool = False,
) -> list[int]:
    """Send ``sig`` to each of ``pids``, give them ``grace_s`` to end, then SIGKILL the rest;
    the processes still alive :data:`SETTLE_S` later (normally none).

    With ``groups``, a PID that leads its process group (a session of its own) is signalled
    as the whole group, and its descendants that left the group (an agent's jobs run in their
    own sessions) are SIGKILLed after the grace if they outlived it.  A zombie counts as
    ended: a caller stopping its own children reaps them afterwards (until then their zombies
    pin their PIDs and group ids).
    """
    targets = [(pid, groups and leads_group(pid)) for pid in pids if alive(pid)]
    tree = set().union(*(descendants(pid) for pid, _ in targets)) if groups else set()
    for pid, as_group in targets:
        _send(pid, sig, as_group=as_group)
    if sig != signal.SIGKILL:
        wait_gone([pid for pid, _ in targets], grace_s)
    for pid, as_group in targets:
        if alive(pid) or (as_group and group_members(pid)):
            _send(pid, signal.SIGKILL, as_group=as_group)
    for pid in tree:
        if alive(pid):
            signal_pid(pid, signal.SIGKILL)
    watched = {pid for pid, _ in targets} | tree
    watched |= {m for pid, as_group in targets if as_group for m in group_members(pid)}
    return wait_gone(sorted(watched), SETTLE_S)


def _send(pid: int, sig: int, *, as_group: bool) -> None:
    if as_group:
        signal_group(pid, sig)
    else:
        signal_pid(pid, sig)

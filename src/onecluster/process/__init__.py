"""Processes by PID: what ``/proc`` says about them, signals to a PID or a process group, the
stop of a set of processes (signal, grace, SIGKILL), and :class:`Child`, a child process that
leads its own session.

The one implementation of these for the whole code base: the local backend runs each attempt
as a :class:`Child`, and the launcher (:mod:`onecluster.launch`) the stack's processes.  Only
the standard library is used; errors are :class:`OSError`, which callers translate.
"""

from onecluster.process._child import Child
from onecluster.process._proc import alive, cmdline, descendants, environ, group_members, pids
from onecluster.process._signals import (
    exit_code_of,
    signal_group,
    signal_pid,
    stop_pids,
    wait_gone,
)

__all__ = [
    "Child",
    "alive",
    "cmdline",
    "descendants",
    "environ",
    "exit_code_of",
    "group_members",
    "pids",
    "signal_group",
    "signal_pid",
    "stop_pids",
    "wait_gone",
]

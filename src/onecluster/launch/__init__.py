"""The launcher of the stack's processes, for ``onecluster up`` and ``onecluster lab``:
:class:`Launcher` starts, watches and stops them (by PID, never by name), and
:func:`start_server` / :func:`start_agent` start the server and the agents the same way for
both.  The primitives it stands on (``/proc``, signals) are :mod:`onecluster.process`."""

from onecluster.launch._launcher import Launched, Launcher, StopReport, log_tail
from onecluster.launch._stack import (
    StartedServer,
    admin_token,
    free_port,
    start_agent,
    start_server,
    wait_server,
)

__all__ = [
    "Launched",
    "Launcher",
    "StartedServer",
    "StopReport",
    "admin_token",
    "free_port",
    "log_tail",
    "start_agent",
    "start_server",
    "wait_server",
]

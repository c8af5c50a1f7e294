"""Finding the process group an earlier agent left running, by the attempt it belongs to.

Each attempt runs as a :class:`onecluster.process.Child`: a process tree in a session of its
own, signalled and reaped as a group, so no stray grandchild keeps running on GPUs the backend
believes free.  A restarted agent finds the groups its predecessor left through the attempt
records, and :func:`kill_stray_group` makes sure a group is still that attempt's before it
kills it.
"""

from __future__ import annotations

import signal

from onecluster.process import environ, group_members, signal_group

__all__ = ["kill_stray_group"]


def kill_stray_group(pgid: int, attempt_id: str) -> bool:
    """SIGKILL group ``pgid`` left behind by an earlier agent, if it is still that attempt's.

    A group id can be reused once its processes are gone, so a member must still carry
    ``ONECLUSTER_ATTEMPT_ID=<attempt_id>`` in its environment (read from ``/proc``).  Returns
    whether a group was killed; False where ``/proc`` does not exist.
    """
    marker = f"ONECLUSTER_ATTEMPT_ID={attempt_id}".encode()
    if any(marker in environ(pid) for pid in group_members(pgid)):
        return signal_group(pgid, signal.SIGKILL)
    return False

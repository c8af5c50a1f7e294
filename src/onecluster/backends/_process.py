"""One attempt's process tree: spawned in its own session, signalled and reaped as a group.

The child is started with ``setsid`` so that its process group holds everything it forks;
signals go to the whole group.  When the leader exits we first look at it *without* reaping
(``waitid(WNOWAIT)``), kill what is left of its group while the leader's zombie still pins the
group id (so the id cannot have been reused), and only then reap it.  No stray grandchild keeps
running on GPUs the backend believes free.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["ChildProcess", "exit_code_of", "kill_group", "kill_stray_group"]


def exit_code_of(returncode: int) -> int:
    """A Popen return code as a shell reports it: killed by signal N → ``128 + N``."""
    return 128 - returncode if returncode < 0 else returncode


def kill_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to process group ``pgid``; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        # Only a group that is not ours (its id was reused) refuses us: leave it alone.
        return False
    return True


class ChildProcess:
    """A running command whose whole process tree is signalled and cleaned up together.

    ``spawn`` raises :class:`OSError` when the executable cannot be run (missing, not
    executable); everything else never raises.
    """

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self._code: int | None = None

    @classmethod
    def spawn(
        cls, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, log_path: Path
    ) -> ChildProcess:
        """Start ``argv`` in a new session, stdout and stderr appended to ``log_path``."""
        with log_path.open("ab") as log:
            popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=dict(env),
                start_new_session=True,
                close_fds=True,
            )
        return cls(popen)

    @property
    def pid(self) -> int:
        """The leader's pid, which is also the process group id."""
        return self._popen.pid

    def exit_code(self) -> int | None:
        """The exit code once the leader has exited (its group then killed and it reaped);
        ``None`` while it runs.  Never blocks."""
        if self._code is not None:
            return self._code
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            # Already reaped elsewhere (Popen does so on some paths); its code is recorded.
            if self._popen.poll() is None:
                return None
        else:
            if info is None:
                return None
            kill_group(self.pid, signal.SIGKILL)
        self._code = exit_code_of(self._popen.wait())
        return self._code

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to every process of the group; nothing if it has ended."""
        if self._code is None:
            kill_group(self.pid, sig)


def kill_stray_group(pgid: int, attempt_id: str) -> bool:
    """SIGKILL group ``pgid`` left behind by an earlier agent, if it is still that attempt's.

    A group id can be reused once its processes are gone, so a member must still carry
    ``ONECLUSTER_ATTEMPT_ID=<attempt_id>`` in its environment (read from ``/proc``).  Returns
    whether a group was killed; False where ``/proc`` does not exist.
    """
    marker = f"ONECLUSTER_ATTEMPT_ID={attempt_id}".encode()
    proc = Path("/proc")
    if not proc.is_dir():
        return False
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            # Field 5 is the process group; the command name in field 2 may hold spaces.
            pgrp = int(stat.rsplit(")", 1)[1].split()[2])
            if pgrp != pgid:
                continue
            environ = (entry / "environ").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if marker in environ.split(b"\0"):
            return kill_group(pgid, signal.SIGKILL)
    return False

"""A child process that leads a session of its own, so that its process group holds everything
it forks: spawned with its output appended to a log, signalled as a group, reaped safely.

When the leader exits we first look at it *without* reaping (``waitid(WNOWAIT)``), kill what
is left of its group while the leader's zombie still pins the group id (so the id cannot have
been reused), and only then reap it.  Nothing it started in its group outlives it.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from onecluster.process._signals import SETTLE_S, exit_code_of, signal_group, stop_pids

__all__ = ["Child"]


class Child:
    """A running command whose whole process tree is signalled and cleaned up together.

    :meth:`spawn` raises :class:`OSError` when the executable cannot be run (missing, not
    executable) and :class:`ValueError` for an argument Popen refuses (an embedded NUL);
    nothing else raises.  A child outlives the process that spawned it unless stopped.
    """

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self._code: int | None = None

    @classmethod
    def spawn(
        cls,
        argv: Sequence[str],
        *,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        pass_fds: Sequence[int] = (),
    ) -> Child:
        """Start ``argv`` in a new session, stdin from /dev/null, stdout and stderr appended
        to ``log_path`` (its directory is created).  ``env=None`` passes ours on; the
        descriptors in ``pass_fds`` are inherited (all others are closed)."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=dict(env) if env is not None else None,
                start_new_session=True,
                close_fds=True,
                pass_fds=tuple(pass_fds),
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
            signal_group(self.pid, signal.SIGKILL)
        self._code = exit_code_of(self._popen.wait())
        return self._code

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to every process of the group; nothing if it has ended."""
        if self._code is None:
            signal_group(self.pid, sig)

    def stop(self, grace_s: float) -> bool:
        """SIGTERM the group, SIGKILL it after ``grace_s``, SIGKILL every descendant that left
        the group and outlived it, and reap the leader.  Blocks for about ``grace_s`` at most
        (plus a few seconds for processes stuck in the kernel); whether all of it is gone."""
        if self._code is not None:
            return True
        survivors = stop_pids([self.pid], grace_s=grace_s, groups=True)
        try:
            self._code = exit_code_of(self._popen.wait(timeout=SETTLE_S))
        except subprocess.TimeoutExpired:
            return False
        return not survivors

"""One agent per work directory: an exclusive lock on ``<work-dir>/agent.lock``.

A second agent on a directory would take the first one's attempt records for leftovers and
kill its jobs.  The lock is an ``flock`` held by the agent and shared with its watchdog (the
descriptor is inherited), so it stays held while either lives.  A new agent that finds it
held by a watchdog whose agent is gone asks that watchdog to end what it guards (SIGTERM) and
takes the directory once it has; one held by a live agent is refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from pathlib import Path
from types import TracebackType

from onecluster.errors import ConflictError
from onecluster.process import alive

__all__ = ["WorkDirLock"]

_LOCK_FILE = "agent.lock"
#: How long a new agent waits for a previous agent's watchdog to let go.
_TAKEOVER_S = 15.0


class WorkDirLock:
    """The lock of one work directory, held from :meth:`acquire` until :meth:`release`."""

    def __init__(self, work_dir: Path) -> None:
        self._path = work_dir / _LOCK_FILE
        self._fd: int | None = None

    @property
    def fd(self) -> int:
        """The locked descriptor (to hand to the watchdog)."""
        assert self._fd is not None, "the lock is not held"
        return self._fd

    def acquire(self) -> WorkDirLock:
        """Take the lock for this process; :class:`ConflictError` if a live agent holds it."""
        self._path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + _TAKEOVER_S
        asked = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = self._holder()
                agent, dog = holder.get("agent_pid"), holder.get("watchdog_pid")
                if isinstance(agent, int) and alive(agent):
                    os.close(fd)
                    msg = (
                        f"another agent (pid {agent}) runs from {self._path.parent}; two agents "
                        "on one work directory would kill each other's jobs"
                    )
                    raise ConflictError(msg, hint="give each agent its own --work-dir") from None
                if not asked and isinstance(dog, int) and alive(dog):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(dog, signal.SIGTERM)
                    asked = True
                if time.monotonic() >= deadline:
                    os.close(fd)
                    msg = f"the work directory {self._path.parent} stays locked ({holder})"
                    raise ConflictError(msg, hint="give this agent another --work-dir") from None
                time.sleep(0.1)
        self._fd = fd
        self._write({"agent_pid": os.getpid()})
        return self

    def note(self, **pids: int) -> None:
        """Add to the record of who holds the lock (e.g. the watchdog's pid)."""
        self._write({**self._holder(), **pids})

    def _write(self, body: dict[str, object]) -> None:
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, json.dumps(body).encode(), 0)

    def _holder(self) -> dict[str, object]:
        try:
            body = json.loads(self._path.read_text("utf-8") or "{}")
        except (OSError, ValueError):
            return {}
        return body if isinstance(body, dict) else {}

    def release(self) -> None:
        """Let go of the lock (the watchdog may still hold it); idempotent."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> WorkDirLock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

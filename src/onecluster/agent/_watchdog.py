"""The agent's watchdog: a process of its own that ends the local jobs when the agent cannot.

The lease rule (``docs/architecture.md``) asks the agent to have its attempts gone by its end
of the lease.  An agent that is frozen (SIGSTOP, a hung call) or dead (``kill -9``, OOM) can
do nothing, and local jobs run in sessions of their own, so they would outlive that end and
run beside the replacement the server starts elsewhere.  The watchdog closes that gap:

* after every answered sync the agent writes ``<work-dir>/lease.json`` — its pid and, on the
  system-wide monotonic clock, a moment a little after its end of the lease and before the
  server's (half the margin of :class:`~onecluster.agent._lease.Lease`);
* the watchdog, started by the agent in a session of its own, looks at that file a few times
  a second; once the moment has passed unrenewed it SIGKILLs every unfinished attempt of the
  work directory (``kill_leftovers``), noting their ids first in ``watchdog-stopped.json``, so
  that an agent that wakes up reports them ``lost``, never as their own failure;
* it ends once its agent is gone and nothing is left to guard, when another agent's pid is in
  the file, or on SIGTERM (after killing what is left: a new agent on the directory asks so).

It holds the agent's work-directory lock with it (:mod:`onecluster.agent._workdir`), so no
other agent starts on the directory while it guards jobs there.  It watches local processes
only: Slurm and Kubernetes sites run their jobs under their own managers.
"""

from __future__ import annotations

import json
import logging
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from onecluster.backends import kill_leftovers
from onecluster.logs import LogFormat, setup_logging
from onecluster.process import alive

__all__ = [
    "LEASE_FILE",
    "STOPPED_FILE",
    "Watchdog",
    "main",
    "stopped_by_watchdog",
    "write_lease",
]

#: In the work directory: the agent's lease, and what the watchdog stopped.
LEASE_FILE = "lease.json"
STOPPED_FILE = "watchdog-stopped.json"
#: How often the watchdog looks.
_TURN_S = 0.2

_log = logging.getLogger("onecluster.watchdog")


def write_lease(work_dir: Path, *, agent_pid: int, kill_at: float | None) -> None:
    """Write the lease file (``kill_at`` on ``time.monotonic``'s clock; ``None``: nothing to
    guard, e.g. the agent shut down cleanly).  Atomic; an error is logged, never raised."""
    path = work_dir / LEASE_FILE
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps({"agent_pid": agent_pid, "kill_at": kill_at}), "utf-8")
        tmp.replace(path)
    except OSError as exc:
        _log.warning("cannot write the lease file %s: %s", path, exc)


@dataclass(frozen=True, slots=True)
class _Lease:
    agent_pid: int
    kill_at: float | None


def _read_lease(work_dir: Path) -> _Lease | None:
    try:
        body = json.loads((work_dir / LEASE_FILE).read_text("utf-8"))
        kill_at = body.get("kill_at")
        return _Lease(int(body["agent_pid"]), None if kill_at is None else float(kill_at))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def stopped_by_watchdog(work_dir: Path) -> frozenset[str]:
    """The attempt ids the watchdog of ``work_dir`` has stopped (empty when none)."""
    try:
        return frozenset(json.loads((work_dir / STOPPED_FILE).read_text("utf-8")))
    except (OSError, ValueError, TypeError):
        return frozenset()


class Watchdog:
    """Guards the jobs of ``work_dir`` for the agent ``agent_pid`` (see the module)."""

    def __init__(self, work_dir: Path, agent_pid: int) -> None:
        self._dir = work_dir
        self._agent_pid = agent_pid

    def step(self, now: float) -> bool:
        """Look once at ``now`` (monotonic); whether to go on watching."""
        lease = _read_lease(self._dir)
        if lease is not None and lease.agent_pid != self._agent_pid:
            return False  # another agent runs the directory now
        guarding = lease is not None and lease.kill_at is not None
        if guarding and lease is not None and lease.kill_at is not None and now >= lease.kill_at:
            self.stop_all("its lease ran out and the agent did not act")
            guarding = False
        return guarding or alive(self._agent_pid)

    def stop_all(self, why: str) -> None:
        """SIGKILL every unfinished attempt of the directory, noting the ids first."""
        killed = kill_leftovers(self._dir, before=self._note)
        if killed:
            _log.error("killed %d attempt(s) of %s: %s", len(killed), self._dir, why)
        write_lease(self._dir, agent_pid=self._agent_pid, kill_at=None)

    def _note(self, attempt_ids: list[str]) -> None:
        path = self._dir / STOPPED_FILE
        ids = sorted(stopped_by_watchdog(self._dir) | set(attempt_ids))
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(ids), "utf-8")
        tmp.replace(path)


def main(argv: list[str]) -> int:
    """``python -m onecluster.agent._watchdog_main WORK_DIR AGENT_PID [FORMAT [SITE]]``:
    watch until done, logging in FORMAT (``text`` or ``json``, as the agent does)."""
    log_format = LogFormat.parse(argv[2], source="FORMAT") if len(argv) > 2 else LogFormat.TEXT
    setup_logging(
        role="agent-watchdog", log_format=log_format, site=argv[3] if len(argv) > 3 else None
    )
    work_dir, agent_pid = Path(argv[0]), int(argv[1])
    dog = Watchdog(work_dir, agent_pid)

    def on_term(_signum: int, _frame: FrameType | None) -> None:
        dog.stop_all("a new agent on the directory asked for it")
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    _log.info("watching the jobs of %s for agent %d", work_dir, agent_pid)
    while dog.step(time.monotonic()):
        time.sleep(_TURN_S)
    return 0

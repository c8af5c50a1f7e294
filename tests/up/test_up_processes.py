"""Children of ``up`` are stopped by PID, with their descendants, however they behave."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from onecluster.errors import BackendError
from onecluster.up._processes import ProcessSet, descendants_of

# A parent that starts a grandchild in its own session (as an agent starts jobs), prints its
# PID, and then waits; with IGNORE it also ignores SIGTERM.
PARENT = """
import signal, subprocess, sys, time
if sys.argv[1] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
job = subprocess.Popen(["sleep", "300"], start_new_session=True)
print(job.pid, flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def _grandchild(log: Path) -> int:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        text = log.read_text().strip()
        if text:
            return int(text.splitlines()[0])
        time.sleep(0.05)
    raise AssertionError("the child never reported its job's PID")


@pytest.mark.parametrize("mode", ["polite", "ignore"])
def test_stop_all_leaves_no_child_or_grandchild(tmp_path: Path, mode: str) -> None:
    processes = ProcessSet(tmp_path / "logs", grace_s=0.5)
    with processes:
        child = processes.start("agent-x", [sys.executable, "-c", PARENT, mode])
        job = _grandchild(child.log_path)
        assert job in descendants_of(child.pid)
        assert child.pid in descendants_of(os.getpid())
    assert not _alive(child.pid)
    assert not _alive(job)
    assert processes.children == ()


def test_children_stop_in_reverse_order_and_report_themselves(tmp_path: Path) -> None:
    processes = ProcessSet(tmp_path, grace_s=2)
    first = processes.start("server", ["sleep", "60"])
    second = processes.start("agent-a", ["sleep", "60"])
    assert processes.children == (first, second)
    stopped = processes.stop_all()
    assert [c.name for c in stopped] == ["agent-a", "server"]
    assert not _alive(first.pid)
    assert not _alive(second.pid)
    assert processes.stop_all() == []


def test_exited_children_are_reported_with_their_status(tmp_path: Path) -> None:
    with ProcessSet(tmp_path, grace_s=1) as processes:
        child = processes.start(
            "quick", [sys.executable, "-c", "print('bye'); raise SystemExit(3)"]
        )
        deadline = time.monotonic() + 10
        while not processes.exited() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes.exited() == [(child, 3)]
    assert child.log_path.read_text().strip() == "bye"


def test_a_program_that_does_not_exist_is_a_backend_error(tmp_path: Path) -> None:
    with ProcessSet(tmp_path) as processes, pytest.raises(BackendError, match="could not start"):
        processes.start("ghost", [str(tmp_path / "no-such-program")])

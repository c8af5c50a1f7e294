"""The launcher starts, watches and stops real processes: by PID, with their descendants,
however they behave; and it recognises its own processes started by an earlier command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.process.conftest import wait_for

from onecluster.errors import BackendError, UnavailableError
from onecluster.launch import Launcher
from onecluster.process import alive, descendants

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


def _grandchild(log: Path) -> int:
    wait_for(lambda: bool(log.read_text().strip()), "the child reports its job's PID")
    return int(log.read_text().split()[0])


@pytest.mark.parametrize("mode", ["polite", "ignore"])
def test_stop_all_leaves_no_child_or_grandchild(tmp_path: Path, mode: str) -> None:
    launcher = Launcher(tmp_path / "logs", grace_s=0.5)
    with launcher:
        child = launcher.start("agent-x", [sys.executable, "-c", PARENT, mode])
        job = _grandchild(child.log_path)
        assert job in descendants(child.pid)
        assert child.pid in descendants(os.getpid())
    assert not alive(child.pid)
    assert not alive(job)
    assert launcher.children == ()


def test_processes_stop_in_reverse_order_and_report_themselves(tmp_path: Path) -> None:
    launcher = Launcher(tmp_path, grace_s=2)
    first = launcher.start("server", ["sleep", "60"])
    second = launcher.start("agent-a", ["sleep", "60"])
    assert launcher.children == (first, second)
    report = launcher.stop_all()
    assert [c.name for c in report.stopped] == ["agent-a", "server"]
    assert report.survivors == ()
    assert not alive(first.pid)
    assert not alive(second.pid)
    assert launcher.stop_all().stopped == ()


def test_exited_processes_are_reported_with_their_status_and_log(tmp_path: Path) -> None:
    with Launcher(tmp_path, grace_s=1) as launcher:
        child = launcher.start("quick", [sys.executable, "-c", "print('bye'); raise SystemExit(3)"])
        wait_for(lambda: bool(launcher.exited()), "the child exits")
        assert launcher.exited() == [(child, 3)]
        with pytest.raises(BackendError, match=r"quick \(pid \d+\) exited with status 3") as err:
            launcher.check()
        assert err.value.hint is not None and "bye" in err.value.hint
    assert child.log_path == tmp_path / "quick.log"
    assert child.log_path.read_text().strip() == "bye"


def test_logs_are_appended_to_not_overwritten(tmp_path: Path) -> None:
    log = tmp_path / "elsewhere" / "one.log"
    log.parent.mkdir()
    log.write_text("earlier run\n")
    with Launcher(tmp_path / "logs") as launcher:
        child = launcher.start("one", ["echo", "this run"], log_path=log)
        wait_for(lambda: bool(launcher.exited()), "echo exits")
    assert child.log_path == log
    assert log.read_text() == "earlier run\nthis run\n"


def test_a_program_that_does_not_exist_is_a_backend_error(tmp_path: Path) -> None:
    with Launcher(tmp_path) as launcher, pytest.raises(BackendError, match="could not start"):
        launcher.start("ghost", [str(tmp_path / "no-such-program")])


def test_wait_until_fails_fast_when_a_process_exits_and_times_out_otherwise(
    tmp_path: Path,
) -> None:
    with Launcher(tmp_path) as launcher:
        launcher.start("dies", [sys.executable, "-c", "raise SystemExit(4)"])
        with pytest.raises(BackendError, match="dies"):
            launcher.wait_until(
                lambda: False, timeout_s=60, failure=lambda: UnavailableError("never")
            )
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]

    with Launcher(tmp_path) as launcher:
        launcher.start("sleeps", ["sleep", "60"])
        with pytest.raises(UnavailableError, match="not ready"):
            launcher.wait_until(
                lambda: False,
                timeout_s=3,
                failure=lambda: UnavailableError("not ready"),
                clock=clock,
            )


# One command of the lab: it starts a process through a launcher and ends.  The process's
# command line reads as the lab's do: ``… -m onecluster.<module> <lab dir>/…``.
START_AND_EXIT = """
import sys
from pathlib import Path
from onecluster.launch import Launcher
marker = sys.argv[1]
sleeper = "import time; time.sleep(60)"
argv = [sys.executable, "-c", sleeper, "-m", "onecluster.emulator", marker + "x.json"]
print(Launcher(Path(marker) / "logs", marker=marker).start("emulator", argv).pid)
"""


def test_processes_outlive_the_command_and_a_later_one_stops_only_its_own(
    tmp_path: Path,
) -> None:
    """As in the lab: one command starts the processes, a later one stops them by PID — only
    those whose command line still names the stack's directory."""
    marker = f"{tmp_path}/"
    started = subprocess.run(
        [sys.executable, "-c", START_AND_EXIT, marker],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    ours = int(started.stdout)
    stranger = subprocess.Popen(["sleep", "60"], cwd=tmp_path)  # names no marker
    try:
        later = Launcher(tmp_path / "logs", marker=marker, grace_s=1)
        wait_for(lambda: later.owns(ours), "the started process runs on")
        assert ours not in descendants(os.getpid())
        assert not later.owns(stranger.pid)
        assert not Launcher(tmp_path / "logs").owns(ours)  # no marker: owns nothing
        assert later.own_processes() == [ours]
        stopped, survivors = later.stop_owned([ours, stranger.pid], grace_s=1)
        assert (stopped, survivors) == ([ours], [])
        assert not alive(ours)
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()

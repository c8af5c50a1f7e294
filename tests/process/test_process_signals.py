"""The process primitives on real processes: /proc readings, the stop of processes that are
not our children, and of a :class:`Child`'s whole tree."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.process.conftest import wait_for

from onecluster.process import (
    Child,
    alive,
    cmdline,
    descendants,
    environ,
    exit_code_of,
    group_members,
    signal_group,
    signal_pid,
    stop_pids,
)

# Forks a grandchild in the parent's own group and one in a session of its own, prints both
# PIDs, then waits; with "ignore" it ignores SIGTERM.
TREE = """
import signal, subprocess, sys, time
if sys.argv[1] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
same = subprocess.Popen(["sleep", "300"])
own = subprocess.Popen(["sleep", "300"], start_new_session=True)
print(same.pid, own.pid, flush=True)
time.sleep(300)
"""


def _pids_from(log: Path) -> tuple[int, int]:
    wait_for(lambda: len(log.read_text().split()) == 2, "the tree reports its PIDs")
    same, own = log.read_text().split()
    return int(same), int(own)


def test_proc_readings_of_a_live_process_and_a_zombie(tmp_path: Path) -> None:
    child = subprocess.Popen(
        ["sleep", "60"], env={"MARK": "here", "PATH": os.environ["PATH"]}, start_new_session=True
    )
    try:
        assert alive(child.pid)
        wait_for(lambda: cmdline(child.pid) == [b"sleep", b"60"], "the child has exec'd")
        assert b"MARK=here" in environ(child.pid)
        assert group_members(child.pid) == [child.pid]
        assert child.pid in descendants(os.getpid())
    finally:
        child.kill()
    wait_for(lambda: not alive(child.pid), "the killed child is a zombie")
    assert Path(f"/proc/{child.pid}").exists()  # not reaped yet: a zombie, which counts as ended
    assert group_members(child.pid) == []
    child.wait()
    assert cmdline(child.pid) == [] and environ(child.pid) == []
    assert not signal_pid(child.pid, 0) and not signal_group(child.pid, 0)


def test_exit_codes_read_as_a_shell_reports_them() -> None:
    assert exit_code_of(0) == 0
    assert exit_code_of(3) == 3
    assert exit_code_of(-signal.SIGKILL) == 137
    assert exit_code_of(-signal.SIGTERM) == 143


@pytest.mark.parametrize("mode", ["polite", "ignore"])
def test_a_child_stops_with_its_group_and_the_descendants_that_left_it(
    tmp_path: Path, mode: str
) -> None:
    log = tmp_path / "tree.log"
    child = Child.spawn([sys.executable, "-c", TREE, mode], log_path=log)
    same, own = _pids_from(log)
    assert {same, own} <= descendants(child.pid)
    assert set(group_members(child.pid)) == {child.pid, same}
    started = time.monotonic()
    assert child.stop(grace_s=0.5)
    assert not any(alive(p) for p in (child.pid, same, own))
    assert not Path(f"/proc/{child.pid}").exists()  # reaped
    assert child.exit_code() == (143 if mode == "polite" else 137)
    if mode == "polite":
        assert time.monotonic() - started < 5  # it did not wait out a grace it did not need


def test_a_leader_that_exits_takes_its_group_with_it(tmp_path: Path) -> None:
    log = tmp_path / "tree.log"
    child = Child.spawn([sys.executable, "-c", TREE, "polite"], log_path=log)
    same, own = _pids_from(log)
    signal_pid(child.pid, signal.SIGKILL)  # the leader alone
    wait_for(lambda: child.exit_code() is not None, "the leader is seen to exit")
    assert child.exit_code() == 137
    wait_for(lambda: not alive(same), "its group is killed")
    assert alive(own)  # a session of its own: not the group's (stop() takes those too)
    signal_pid(own, signal.SIGKILL)


def test_stop_pids_stops_processes_that_are_not_our_children(tmp_path: Path) -> None:
    # Started through a shell that exits at once: they are re-parented away from us.
    quiet = ">/dev/null 2>&1"
    script = f"sleep 300 {quiet} & echo $!; (trap '' TERM; exec sleep 300) {quiet} & echo $!"
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    polite, stubborn = map(int, out.stdout.split())
    assert polite not in descendants(os.getpid())
    wait_for(lambda: alive(polite) and alive(stubborn), "both run")
    assert stop_pids([polite, stubborn], grace_s=0.3) == []
    assert not alive(polite) and not alive(stubborn)


def test_stop_pids_signals_a_pid_that_leads_no_group_by_itself(tmp_path: Path) -> None:
    """A process in our own group must not be stopped through its (our) group."""
    child = subprocess.Popen(["sleep", "60"])  # in our process group
    try:
        assert stop_pids([child.pid], grace_s=1, groups=True) == []
        assert child.wait(timeout=5) == -signal.SIGTERM
    finally:
        child.kill()
        child.wait()


# Its main thread ends (a zombie, as /proc shows it) while another thread runs on.
MAIN_THREAD_ENDS = """
import ctypes, threading, time
threading.Thread(target=time.sleep, args=(300,)).start()
print("ready", flush=True)
ctypes.CDLL(None).pthread_exit(None)
"""


def test_a_process_runs_while_any_thread_of_it_does(tmp_path: Path) -> None:
    """Its main thread shows as a zombie while other threads still run (or still exit, after
    a SIGKILL); until the last is gone the process cannot be reaped, so it must not count as
    ended, or a stop would return too early."""
    log = tmp_path / "threads.log"
    child = Child.spawn([sys.executable, "-c", MAIN_THREAD_ENDS], log_path=log)
    stat = Path(f"/proc/{child.pid}/stat")
    wait_for(lambda: stat.read_text().rsplit(")", 1)[1].split()[0] == "Z", "the main thread ends")
    assert alive(child.pid)
    assert child.exit_code() is None
    assert child.pid in group_members(child.pid)
    assert child.stop(grace_s=5)
    assert child.exit_code() == 143 and not alive(child.pid)

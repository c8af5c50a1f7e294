"""The watchdog and the work-directory lock: local jobs end by the agent's lease even when the
agent cannot end them, and two agents never share a work directory."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from onecluster.agent._own_stops import OwnStops
from onecluster.agent._watchdog import Watchdog, stopped_by_watchdog, write_lease
from onecluster.agent._workdir import WorkDirLock
from onecluster.backends import AttemptSpec, LocalBackend
from onecluster.errors import ConflictError
from onecluster.model import AttemptState
from onecluster.process import alive


def start_job(work_dir: Path, attempt_id: str = "a1") -> tuple[LocalBackend, int]:
    backend = LocalBackend("sha", {"H100": 4}, work_dir)
    pidfile = work_dir / f"{attempt_id}.pid"
    script = f"echo $$ > {pidfile}; exec sleep 600"
    backend.start(
        AttemptSpec(
            attempt_id=attempt_id, job_id="j", command=("sh", "-c", script), gpu_type="H100", gpus=1
        )
    )
    deadline = time.monotonic() + 5
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return backend, int(pidfile.read_text())


def reap(backend: LocalBackend) -> None:
    deadline = time.monotonic() + 5
    while any(s.state is AttemptState.RUNNING for s in backend.poll()):
        assert time.monotonic() < deadline, "the job was not killed"
        time.sleep(0.01)


def test_the_watchdog_kills_the_jobs_once_the_lease_ran_out_and_notes_them(
    tmp_path: Path,
) -> None:
    backend, pid = start_job(tmp_path)
    dog = Watchdog(tmp_path, agent_pid=os.getpid())
    write_lease(tmp_path, agent_pid=os.getpid(), kill_at=100.0)
    assert dog.step(now=99.0)
    assert alive(pid)  # the lease still holds
    assert dog.step(now=100.0)  # its agent lives: it keeps watching
    reap(backend)
    assert not alive(pid)
    assert stopped_by_watchdog(tmp_path) == {"a1"}
    # An agent that wakes up reports it lost, not as the job's exit.
    assert "a1" in OwnStops(tmp_path / "state.json", watchdog_dir=tmp_path)
    backend.close(grace_s=0.1)


def test_the_watchdog_leaves_a_renewed_lease_and_another_agents_directory_alone(
    tmp_path: Path,
) -> None:
    backend, pid = start_job(tmp_path)
    dog = Watchdog(tmp_path, agent_pid=os.getpid())
    write_lease(tmp_path, agent_pid=os.getpid(), kill_at=200.0)
    assert dog.step(now=150.0)
    write_lease(tmp_path, agent_pid=1, kill_at=100.0)  # another agent's, long past
    assert not dog.step(now=150.0)  # not its business any more: it ends, killing nothing
    assert alive(pid)
    backend.close(grace_s=0.1)


def test_a_watchdog_whose_agent_is_gone_ends_when_nothing_is_left_to_guard(
    tmp_path: Path,
) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dog = Watchdog(tmp_path, agent_pid=gone.pid)
    write_lease(tmp_path, agent_pid=gone.pid, kill_at=None)
    assert not dog.step(now=0.0)


def test_a_new_agent_takes_over_from_a_dead_agents_watchdog(tmp_path: Path) -> None:
    backend, pid = start_job(tmp_path)
    lock = WorkDirLock(tmp_path).acquire()
    # A stand-in watchdog that inherited the lock: it lives on after its "agent" is gone.
    write_lease(tmp_path, agent_pid=999999, kill_at=time.monotonic() + 3600)
    dog = subprocess.Popen(
        [sys.executable, "-m", "onecluster.agent._watchdog_main", str(tmp_path), "999999"],
        pass_fds=[lock.fd],
        start_new_session=True,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert dog.stderr is not None
    assert "watching the jobs" in dog.stderr.readline()  # ready: it handles SIGTERM now
    lock.note(agent_pid=999999, watchdog_pid=dog.pid)
    write_lease(tmp_path, agent_pid=999999, kill_at=time.monotonic() + 3600)
    lock.release()  # the agent died; its watchdog still holds the directory
    probe = os.open(tmp_path / "agent.lock", os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(probe)
    taken = WorkDirLock(tmp_path).acquire()  # asks the watchdog to end what it guards
    code = dog.wait(timeout=10)
    assert code == 0, dog.stderr.read()
    dog.stderr.close()
    reap(backend)
    assert not alive(pid)
    assert stopped_by_watchdog(tmp_path) == {"a1"}
    taken.release()
    backend.close(grace_s=0.1)


def test_two_agents_never_share_a_work_directory(tmp_path: Path) -> None:
    lock = WorkDirLock(tmp_path).acquire()
    try:
        with pytest.raises(ConflictError, match=f"another agent \\(pid {os.getpid()}\\)") as e:
            WorkDirLock(tmp_path).acquire()
        assert "--work-dir" in (e.value.hint or "")
    finally:
        lock.release()
    WorkDirLock(tmp_path).acquire().release()  # free again once its holder let go

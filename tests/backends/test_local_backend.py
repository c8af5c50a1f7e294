"""LocalBackend with real child processes: slots, env, logs, exit codes, stops and recovery.

Waiting here is for real processes to do real things (bounded polls), never for virtual time:
grace periods run on a ManualClock that the tests advance.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from onecluster.backends import AttemptSpec, AttemptStatus, ClusterBackend, LocalBackend
from onecluster.clock import ManualClock
from onecluster.errors import BackendError, ValidationError
from onecluster.model import AttemptState
from onecluster.process import alive

# A child that says it is ready, then idles in short sleeps so a trap runs promptly.
_IDLE = "echo ready; while :; do sleep 0.05; done"


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll ``predicate`` until true; fail the test after ``timeout`` real seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        time.sleep(0.01)


def status_of(backend: LocalBackend, attempt_id: str) -> AttemptStatus:
    return next(s for s in backend.poll() if s.attempt_id == attempt_id)


def wait_exited(backend: LocalBackend, attempt_id: str) -> AttemptStatus:
    wait_for(lambda: status_of(backend, attempt_id).state is AttemptState.EXITED)
    return status_of(backend, attempt_id)


def log_of(backend: LocalBackend, attempt_id: str) -> str:
    return backend.read_logs(attempt_id, 0).data


def spec(attempt_id: str, script: str, gpus: int = 1, **env: str) -> AttemptSpec:
    return AttemptSpec(
        attempt_id=attempt_id,
        job_id=f"job-{attempt_id}",
        command=("sh", "-c", script),
        gpu_type="H100",
        gpus=gpus,
        env=env,
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1000.0)


@pytest.fixture
def backend(tmp_path: Path, clock: ManualClock) -> Iterator[LocalBackend]:
    b = LocalBackend("sha", {"H100": 8, "A100": 2}, tmp_path / "work", clock=clock)
    yield b
    b.close(grace_s=0.5)


def test_it_satisfies_the_protocol(backend: LocalBackend) -> None:
    assert isinstance(backend, ClusterBackend)
    assert backend.name == "local"
    assert dict(backend.capacity()) == {"H100": 8, "A100": 2}


def test_attempt_runs_with_slots_and_identity_in_env_and_logs_captured(
    backend: LocalBackend, clock: ManualClock
) -> None:
    script = (
        "echo slots=$ONECLUSTER_GPU_SLOTS cuda=$CUDA_VISIBLE_DEVICES job=$ONECLUSTER_JOB_ID "
        "attempt=$ONECLUSTER_ATTEMPT_ID site=$ONECLUSTER_SITE extra=$EXTRA; echo oops >&2"
    )
    backend.start(spec("a1", script, gpus=3, EXTRA="yes"))
    clock.advance(2.0)
    status = wait_exited(backend, "a1")
    assert (status.exit_code, status.started_at, status.finished_at) == (0, 1000.0, 1002.0)
    assert status.job_id == "job-a1"
    assert log_of(backend, "a1") == (
        "slots=0,1,2 cuda=0,1,2 job=job-a1 attempt=a1 site=sha extra=yes\noops\n"
    )


def test_exit_code_is_reported_and_slots_are_freed(backend: LocalBackend) -> None:
    backend.start(spec("a1", "exit 3", gpus=8))
    assert wait_exited(backend, "a1").exit_code == 3
    assert backend.statistics().slots[0].free == 8
    backend.start(spec("a2", "echo $ONECLUSTER_GPU_SLOTS", gpus=8))
    wait_exited(backend, "a2")
    assert log_of(backend, "a2") == "0,1,2,3,4,5,6,7\n"


def test_slots_are_never_over_committed(backend: LocalBackend) -> None:
    backend.start(spec("a1", _IDLE, gpus=6))
    with pytest.raises(BackendError, match="needs 3 H100 GPUs but only 2 of 8 are free"):
        backend.start(spec("a2", "echo never", gpus=3))
    assert [s.attempt_id for s in backend.poll()] == ["a1"]
    backend.start(spec("a3", "echo $ONECLUSTER_GPU_SLOTS", gpus=2))
    wait_exited(backend, "a3")
    assert log_of(backend, "a3") == "6,7\n"


def test_start_is_idempotent_per_attempt_id(backend: LocalBackend, tmp_path: Path) -> None:
    marker = tmp_path / "runs"
    backend.start(spec("a1", f"echo run >> {marker}; {_IDLE}"))
    backend.start(spec("a1", f"echo run >> {marker}; {_IDLE}"))
    wait_for(lambda: "ready" in log_of(backend, "a1"))
    assert marker.read_text() == "run\n"
    assert backend.statistics().running == 1


def test_missing_executable_is_reported_as_exit_127(backend: LocalBackend) -> None:
    backend.start(
        AttemptSpec(
            attempt_id="a1", job_id="j", command=("no-such-binary-xyz",), gpu_type="H100", gpus=2
        )
    )
    status = status_of(backend, "a1")
    assert (status.state, status.exit_code) == (AttemptState.EXITED, 127)
    assert "onecluster: cannot start 'no-such-binary-xyz'" in log_of(backend, "a1")
    assert backend.statistics().slots[0].free == 8


def test_stop_sends_sigterm_that_a_trapping_child_handles(backend: LocalBackend) -> None:
    backend.start(spec("a1", f"trap 'echo got TERM; exit 3' TERM; {_IDLE}"))
    wait_for(lambda: "ready" in log_of(backend, "a1"))
    backend.stop("a1", grace_s=30.0, reason="preempted")
    status = wait_exited(backend, "a1")
    assert status.exit_code == 3
    log = log_of(backend, "a1")
    assert "onecluster: stopping (preempted): SIGTERM, SIGKILL after 30 s" in log
    assert "got TERM" in log


def test_stop_kills_after_grace_a_child_that_ignores_sigterm(
    backend: LocalBackend, clock: ManualClock
) -> None:
    backend.start(spec("a1", f"trap 'echo ignoring TERM' TERM; {_IDLE}"))
    wait_for(lambda: "ready" in log_of(backend, "a1"))
    backend.stop("a1", grace_s=5.0, reason="cancelled")
    wait_for(lambda: "ignoring TERM" in log_of(backend, "a1"))
    clock.advance(4.9)
    assert status_of(backend, "a1").state is AttemptState.RUNNING
    clock.advance(0.1)
    status = wait_exited(backend, "a1")
    assert status.exit_code == 137  # 128 + SIGKILL
    assert "onecluster: grace period over: SIGKILL" in log_of(backend, "a1")


def test_stop_kills_the_whole_process_tree(backend: LocalBackend, tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    backend.start(spec("a1", f"sh -c 'sleep 300' & echo $! > {pid_file}; {_IDLE}"))
    wait_for(lambda: "ready" in log_of(backend, "a1"))
    grandchild = int(pid_file.read_text())
    assert alive(grandchild)
    backend.stop("a1", grace_s=0.0, reason="cancelled")
    assert wait_exited(backend, "a1").exit_code == 137
    wait_for(lambda: not alive(grandchild))


def test_leftovers_of_an_exited_leader_are_killed(backend: LocalBackend, tmp_path: Path) -> None:
    pid_file = tmp_path / "bg.pid"
    backend.start(spec("a1", f"sleep 300 & echo $! > {pid_file}; exit 0"))
    assert wait_exited(backend, "a1").exit_code == 0
    wait_for(lambda: not alive(int(pid_file.read_text())))


def test_stop_and_forget_of_unknown_or_running_attempts_do_nothing(
    backend: LocalBackend,
) -> None:
    backend.stop("nope", grace_s=1.0, reason="x")
    backend.forget("nope")
    backend.start(spec("a1", _IDLE))
    backend.forget("a1")
    assert status_of(backend, "a1").state is AttemptState.RUNNING


def test_forget_drops_a_finished_attempt_and_its_directory(
    backend: LocalBackend, tmp_path: Path
) -> None:
    backend.start(spec("a1", "echo hi"))
    wait_exited(backend, "a1")
    assert (tmp_path / "work" / "attempts" / "a1" / "output.log").exists()
    backend.forget("a1")
    assert backend.poll() == []
    assert not (tmp_path / "work" / "attempts" / "a1").exists()


def test_read_logs_pages_through_offsets(backend: LocalBackend) -> None:
    backend.start(spec("a1", "printf 'abcdefghij'"))
    wait_exited(backend, "a1")
    first = backend.read_logs("a1", 0, limit=4)
    second = backend.read_logs("a1", first.next_offset, limit=100)
    assert (first.data, first.next_offset) == ("abcd", 4)
    assert (second.data, second.offset, second.next_offset) == ("efghij", 4, 10)
    assert backend.read_logs("a1", 10).data == ""


def test_close_stops_every_running_attempt(tmp_path: Path) -> None:
    backend = LocalBackend("sha", {"H100": 4}, tmp_path)
    backend.start(spec("a1", _IDLE))
    backend.start(spec("a2", f"trap '' TERM; {_IDLE}"))
    wait_for(lambda: all("ready" in log_of(backend, a) for a in ("a1", "a2")))
    backend.close(grace_s=0.3)
    codes = {s.attempt_id: s.exit_code for s in backend.poll()}
    assert codes == {"a1": 143, "a2": 137}


def test_a_restarted_backend_reports_leftovers_and_never_restarts_them(tmp_path: Path) -> None:
    first = LocalBackend("sha", {"H100": 4}, tmp_path)
    first.start(spec("done", "exit 4"))
    wait_exited(first, "done")
    first.start(spec("busy", _IDLE))
    wait_for(lambda: "ready" in log_of(first, "busy"))
    # A second backend on the same work_dir, as after an agent crash.
    second = LocalBackend("sha", {"H100": 4}, tmp_path)
    states = {s.attempt_id: (s.state, s.exit_code) for s in second.poll()}
    assert states == {"done": (AttemptState.EXITED, 4), "busy": (AttemptState.LOST, None)}
    assert wait_exited(first, "busy").exit_code == 137  # its process group was killed
    second.start(spec("busy", "echo again"))
    assert status_of(second, "busy").state is AttemptState.LOST
    assert "again" not in log_of(second, "busy")
    second.close(grace_s=0.1)
    first.close(grace_s=0.1)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("attempt_id", "../x", "attempt id"),
        ("command", (), "needs a command"),
        ("gpus", 0, "at least 1 GPU"),
        ("gpu_type", "", "gpu_type"),
    ],
)
def test_malformed_specs_are_rejected(field: str, value: object, match: str) -> None:
    fields: dict[str, object] = {
        "attempt_id": "a1",
        "job_id": "j1",
        "command": ("true",),
        "gpu_type": "H100",
        "gpus": 1,
    }
    fields[field] = value
    with pytest.raises(ValidationError, match=match):
        AttemptSpec(**fields)  # type: ignore[arg-type]


def test_children_do_not_inherit_the_backend_environment_overrides(
    backend: LocalBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONECLUSTER_SITE", "spoofed")
    monkeypatch.setenv("PARENT_VAR", "inherited")
    backend.start(spec("a1", "echo $ONECLUSTER_SITE $PARENT_VAR"))
    wait_exited(backend, "a1")
    assert log_of(backend, "a1") == "sha inherited\n"
    assert os.environ["ONECLUSTER_SITE"] == "spoofed"


def test_kill_leftovers_ends_what_a_dead_agent_left_running(
    backend: LocalBackend, tmp_path: Path
) -> None:
    from onecluster.backends import kill_leftovers

    pid_file = tmp_path / "pid"
    backend.start(spec("orphan", f"echo $$ > {pid_file}; {_IDLE}"))
    backend.start(spec("done", "exit 0"))
    wait_exited(backend, "done")
    wait_for(lambda: pid_file.exists() and pid_file.read_text().endswith("\n"))
    pid = int(pid_file.read_text())
    # The agent dies without stopping anything; whoever started it cleans up.
    assert kill_leftovers(tmp_path / "work") == ["orphan"]
    wait_for(lambda: status_of(backend, "orphan").state is AttemptState.EXITED)
    assert not alive(pid)
    assert kill_leftovers(tmp_path / "work") == []  # idempotent: nothing left to kill

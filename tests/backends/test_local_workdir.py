"""Where a local attempt's command runs: its job's workdir, or its own scratch directory."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from onecluster.backends import AttemptSpec, AttemptStatus, LocalBackend
from onecluster.errors import ValidationError
from onecluster.model import AttemptState


def run(backend: LocalBackend, spec: AttemptSpec) -> tuple[AttemptStatus, str]:
    backend.start(spec)
    deadline = time.monotonic() + 5
    while True:
        [status] = [s for s in backend.poll() if s.attempt_id == spec.attempt_id]
        if status.state is AttemptState.EXITED:
            return status, backend.read_logs(spec.attempt_id).data
        assert time.monotonic() < deadline, "the attempt never ended"
        time.sleep(0.01)


def spec(attempt_id: str, workdir: str | None) -> AttemptSpec:
    return AttemptSpec(
        attempt_id=attempt_id,
        job_id="j",
        command=("sh", "-c", 'echo "cwd=$PWD scratch=$ONECLUSTER_SCRATCH"'),
        gpu_type="H100",
        gpus=1,
        workdir=workdir,
    )


def test_a_job_runs_in_its_workdir_and_knows_its_scratch_directory(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    backend = LocalBackend("sha", {"H100": 2}, tmp_path / "agent")
    status, log = run(backend, spec("w1", str(code)))
    scratch = tmp_path / "agent" / "attempts" / "w1"
    assert status.exit_code == 0
    assert log == f"cwd={code} scratch={scratch}\n"


def test_without_a_workdir_it_runs_in_its_scratch_directory(tmp_path: Path) -> None:
    backend = LocalBackend("sha", {"H100": 2}, tmp_path / "agent")
    _, log = run(backend, spec("w2", None))
    scratch = tmp_path / "agent" / "attempts" / "w2"
    assert log == f"cwd={scratch} scratch={scratch}\n"


def test_a_workdir_missing_at_the_site_fails_the_attempt_saying_so(tmp_path: Path) -> None:
    backend = LocalBackend("sha", {"H100": 2}, tmp_path / "agent")
    status, log = run(backend, spec("w3", str(tmp_path / "nowhere")))
    assert status.exit_code == 126
    assert f"the working directory {tmp_path / 'nowhere'} does not exist here" in log


def test_a_relative_workdir_is_refused() -> None:
    with pytest.raises(ValidationError, match="absolute"):
        spec("w4", "code")


def test_a_workdir_that_is_a_file_is_named_as_such(tmp_path: Path) -> None:
    backend = LocalBackend("sha", {"H100": 2}, tmp_path / "agent")
    not_a_dir = tmp_path / "train.py"
    not_a_dir.write_text("")
    status, log = run(backend, spec("w5", str(not_a_dir)))
    assert status.exit_code == 126
    assert f"the working directory {not_a_dir} is not a directory" in log

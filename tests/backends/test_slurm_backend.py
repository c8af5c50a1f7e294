"""The Slurm backend against a real Slurm cluster (slurmctld + slurmd with fake GPU devices)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from onecluster.backends import AttemptSpec, AttemptStatus, SlurmBackend
from onecluster.backends._slurm_cli import decode_exit, parse_gres
from onecluster.errors import BackendError
from onecluster.model import AttemptState

pytestmark = pytest.mark.slurm


def test_exit_statuses_and_gres_are_decoded() -> None:
    assert decode_exit(3 << 8) == 3
    assert decode_exit(127 << 8) == 127
    assert decode_exit(15) == 143  # killed by SIGTERM
    assert decode_exit(0) == 0
    assert parse_gres("gpu:h800:4,gpu:a100:2") == {"h800": 4, "a100": 2}
    assert parse_gres("gpu:h100:8(S:0-1),gpu:h100:8(S:2-3)") == {"h100": 16}
    assert parse_gres("(null)") == {}


@pytest.fixture
def shanghai(slurm_clusters: dict[str, Path], tmp_path: Path) -> Iterator[SlurmBackend]:
    backend = SlurmBackend(
        "shanghai",
        slurm_conf=slurm_clusters["shanghai"],
        work_dir=tmp_path,
        gpu_types=["H800", "A100"],
    )
    yield backend
    backend.close()


def wait_for(
    backend: SlurmBackend, check: Callable[[dict[str, AttemptStatus]], bool], timeout: float = 30.0
) -> dict[str, AttemptStatus]:
    deadline = time.monotonic() + timeout
    while True:
        statuses = {s.attempt_id: s for s in backend.poll()}
        if check(statuses):
            return statuses
        if time.monotonic() > deadline:
            pytest.fail(f"not reached: {statuses}")
        time.sleep(0.2)


def spec(
    attempt_id: str, command: tuple[str, ...], gpu_type: str = "H800", gpus: int = 1
) -> AttemptSpec:
    return AttemptSpec(
        attempt_id=attempt_id,
        job_id=f"job-{attempt_id}",
        command=command,
        gpu_type=gpu_type,
        gpus=gpus,
        env={"EXTRA": "from-server"},
    )


def test_capacity_comes_from_slurm(shanghai: SlurmBackend) -> None:
    assert shanghai.capacity() == {"H800": 4, "A100": 2}
    assert shanghai.healthy


def test_an_attempt_runs_under_slurm_with_its_gres_and_exits(shanghai: SlurmBackend) -> None:
    script = "echo gpus=$CUDA_VISIBLE_DEVICES job=$ONECLUSTER_JOB_ID extra=$EXTRA; exit 3"
    shanghai.start(spec("s1", ("sh", "-c", script), gpus=2))
    shanghai.start(spec("s1", ("sh", "-c", script), gpus=2))  # idempotent
    done = wait_for(shanghai, lambda s: s["s1"].state is AttemptState.EXITED)
    assert done["s1"].exit_code == 3
    assert done["s1"].started_at is not None and done["s1"].finished_at is not None
    log = shanghai.read_logs("s1").data
    assert "gpus=0,1" in log and "job=job-s1" in log and "extra=from-server" in log
    shanghai.forget("s1")
    assert "s1" not in {s.attempt_id for s in shanghai.poll()}


def test_a_command_that_cannot_run_exits_127(shanghai: SlurmBackend) -> None:
    shanghai.start(spec("s2", ("no-such-command-here",), gpu_type="A100"))
    done = wait_for(shanghai, lambda s: s["s2"].state is AttemptState.EXITED)
    assert done["s2"].exit_code == 127


def test_stop_sends_sigterm_and_cancels_after_the_grace(shanghai: SlurmBackend) -> None:
    script = "trap 'echo got-term; exit 0' TERM; echo trapped; sleep 60 & wait"
    shanghai.start(spec("s3", ("sh", "-c", script)))
    wait_for(shanghai, lambda _: "trapped" in shanghai.read_logs("s3").data)  # SIGTERM is caught
    shanghai.stop("s3", 5.0, "preempted")
    done = wait_for(shanghai, lambda s: s["s3"].state is AttemptState.EXITED)
    assert "got-term" in shanghai.read_logs("s3").data
    assert done["s3"].exit_code is not None


def test_gres_is_really_scheduled_a_job_beyond_free_gpus_waits(shanghai: SlurmBackend) -> None:
    shanghai.start(spec("s4", ("sleep", "30"), gpu_type="A100", gpus=2))
    wait_for(shanghai, lambda s: s["s4"].started_at is not None)
    shanghai.start(spec("s5", ("true",), gpu_type="A100", gpus=1))
    # queued, saying why in Slurm's own words, with the backfill scheduler's estimate of
    # when it starts (once it has looked: bf_interval in scripts/slurm.sh)
    status = wait_for(
        shanghai,
        lambda s: s["s5"].waiting_reason is not None and s["s5"].expected_start_at is not None,
    )["s5"]
    assert status.state is AttemptState.RUNNING and status.started_at is None  # pending in Slurm
    assert status.queued and status.waiting_reason == "Resources"
    assert status.expected_start_at is not None and status.expected_start_at >= time.time() - 5
    assert shanghai.problem() is None  # waiting for GPUs is not a problem of the site
    shanghai.stop("s4", 0.0, "make room")
    wait_for(shanghai, lambda s: s["s5"].state is AttemptState.EXITED)


def test_a_gpu_type_the_site_lacks_is_refused(shanghai: SlurmBackend) -> None:
    with pytest.raises(BackendError, match="no H100"):
        shanghai.start(spec("s6", ("true",), gpu_type="H100"))


def test_a_restarted_backend_follows_the_jobs_submitted_before(
    slurm_clusters: dict[str, Path], tmp_path: Path
) -> None:
    first = SlurmBackend(
        "tokyo", slurm_conf=slurm_clusters["tokyo"], work_dir=tmp_path, gpu_types=["H100", "L40S"]
    )
    first.start(spec("t1", ("sleep", "2"), gpu_type="L40S"))
    second = SlurmBackend(
        "tokyo", slurm_conf=slurm_clusters["tokyo"], work_dir=tmp_path, gpu_types=["H100", "L40S"]
    )
    done = wait_for(second, lambda s: s["t1"].state is AttemptState.EXITED)
    assert done["t1"].exit_code == 0


def test_a_controller_that_is_down_keeps_the_last_statuses(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=nowhere\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=6999\n")
    backend = SlurmBackend("nowhere", slurm_conf=conf, work_dir=tmp_path / "w", gpu_types=["H100"])
    assert backend.capacity() == {}  # nothing can be placed here
    assert not backend.healthy
    with pytest.raises(BackendError):
        backend.start(spec("n1", ("true",), gpu_type="H100"))
    assert backend.poll() == []
    problem = backend.problem()
    assert problem is not None and problem.startswith("Slurm does not answer")


def scontrol(conf: Path, *args: str) -> None:
    env = {**os.environ, "SLURM_CONF": str(conf)}
    subprocess.run(["scontrol", *args], env=env, check=True, timeout=30)


def test_a_job_slurm_refuses_degrades_the_site_until_one_is_taken(
    shanghai: SlurmBackend, slurm_clusters: dict[str, Path]
) -> None:
    # an admin closed the partition: sbatch refuses every job
    scontrol(slurm_clusters["shanghai"], "update", "PartitionName=gpu", "State=INACTIVE")
    try:
        with pytest.raises(BackendError, match="partition not available"):
            shanghai.start(spec("r1", ("true",), gpu_type="A100"))
    finally:
        scontrol(slurm_clusters["shanghai"], "update", "PartitionName=gpu", "State=UP")
    problem = shanghai.problem()
    assert problem is not None and problem.startswith("Slurm refused a job"), problem
    shanghai.start(spec("r2", ("true",), gpu_type="A100"))
    assert shanghai.problem() is None
    wait_for(shanghai, lambda s: s["r2"].state is AttemptState.EXITED)

"""The Kubernetes backend against the fake API server of ``kube_fake`` (a fake: no API server
can run here), through the official client: lifecycle, exit codes, stop, capacity, queueing,
Kueue suspension, an API that does not answer, and a restarted agent."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("kubernetes")

from onecluster.backends import AttemptSpec, AttemptStatus
from onecluster.backends._kube_manifest import validate_job
from onecluster.backends.kubernetes import KubernetesBackend
from onecluster.errors import BackendError
from onecluster.model import AttemptState

sys.path.insert(0, str(Path(__file__).parent))
from kube_fake import FakeKubeApi, FakeNode

TYPES = ["H100", "L40S"]


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeKubeApi]:
    nodes = [
        FakeNode("gpu-a", "NVIDIA-H100-80GB-HBM3", 4),
        FakeNode("gpu-b", "NVIDIA-L40S", 2),
        FakeNode("gpu-c", "NVIDIA-H100-80GB-HBM3", 8, ready=False),
    ]
    api = FakeKubeApi(nodes, tmp_path / "pods")
    (tmp_path / "pods").mkdir()
    yield api
    api.close()


def backend(fake: FakeKubeApi, tmp_path: Path, **fields: object) -> KubernetesBackend:
    return KubernetesBackend.connect(
        "singapore",
        gpu_types=TYPES,
        work_dir=tmp_path / "agent",
        kubeconfig=fake.kubeconfig(tmp_path / "kubeconfig"),
        **fields,  # type: ignore[arg-type]
    )


def spec(attempt_id: str, script: str, gpu_type: str = "H100", gpus: int = 1) -> AttemptSpec:
    return AttemptSpec(
        attempt_id=attempt_id,
        job_id=attempt_id.split(".", maxsplit=1)[0],
        command=("sh", "-c", script),
        gpu_type=gpu_type,
        gpus=gpus,
    )


def wait_for(
    kube: KubernetesBackend, check: Callable[[dict[str, AttemptStatus]], bool], timeout: float = 20
) -> dict[str, AttemptStatus]:
    deadline = time.monotonic() + timeout
    while True:
        statuses = {s.attempt_id: s for s in kube.poll()}
        if check(statuses):
            return statuses
        if time.monotonic() > deadline:
            pytest.fail(f"not reached: {statuses}")
        time.sleep(0.2)


def test_capacity_is_the_gpus_of_ready_nodes_by_type(fake: FakeKubeApi, tmp_path: Path) -> None:
    kube = backend(fake, tmp_path)
    assert kube.capacity() == {"H100": 4, "L40S": 2}  # gpu-c is not Ready
    assert kube.problem() is None


def test_a_job_runs_on_a_node_of_its_type_exits_and_its_log_is_read(
    fake: FakeKubeApi, tmp_path: Path
) -> None:
    kube = backend(fake, tmp_path)
    kube.start(
        spec("j-1.1.0", "echo gpus=$NVIDIA_VISIBLE_DEVICES site=$ONECLUSTER_SITE; exit 3", gpus=2)
    )
    kube.start(spec("j-1.1.0", "true"))  # idempotent
    done = wait_for(kube, lambda s: s["j-1.1.0"].state is AttemptState.EXITED)
    assert done["j-1.1.0"].exit_code == 3 and done["j-1.1.0"].started_at is not None
    assert "gpus=0,1 site=singapore" in kube.read_logs("j-1.1.0").data
    [sent] = fake.received
    validate_job(sent)  # what reached the API server validates too
    assert sent["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["NVIDIA-H100-80GB-HBM3"]
    kube.forget("j-1.1.0")
    assert kube.poll() == []
    fake.wait_gone("default", sent["metadata"]["name"])  # the finished Job is deleted too


def test_a_successful_job_exits_zero(fake: FakeKubeApi, tmp_path: Path) -> None:
    kube = backend(fake, tmp_path)
    kube.start(spec("j-2.1.0", "echo ok", gpu_type="L40S"))
    done = wait_for(kube, lambda s: s["j-2.1.0"].state is AttemptState.EXITED)
    assert done["j-2.1.0"].exit_code == 0


def test_a_job_beyond_free_gpus_is_queued_with_the_schedulers_reason(
    fake: FakeKubeApi, tmp_path: Path
) -> None:
    kube = backend(fake, tmp_path)
    kube.start(spec("j-3.1.0", "sleep 30", gpus=4))
    wait_for(kube, lambda s: s["j-3.1.0"].started_at is not None)
    kube.start(spec("j-4.1.0", "true", gpus=1))
    queued = wait_for(kube, lambda s: s["j-4.1.0"].waiting_reason is not None)["j-4.1.0"]
    assert queued.queued and queued.state is AttemptState.RUNNING
    assert "insufficient nvidia.com/gpu" in (queued.waiting_reason or "")
    kube.stop("j-3.1.0", 0.0, "make room")
    done = wait_for(
        kube,
        lambda s: (
            s["j-3.1.0"].state is AttemptState.EXITED and s["j-4.1.0"].state is AttemptState.EXITED
        ),
    )
    # a stopped attempt whose pod is gone before its exit was seen reports 143 (SIGTERM)
    assert done["j-3.1.0"].exit_code in (143, 137) and done["j-4.1.0"].exit_code == 0
    assert done["j-3.1.0"].started_at is not None


def test_stop_deletes_the_job_sigterm_then_sigkill_after_the_grace(
    fake: FakeKubeApi, tmp_path: Path
) -> None:
    kube = backend(fake, tmp_path)
    kube.start(spec("j-5.1.0", "trap 'echo got-term; exit 0' TERM; echo trapped; sleep 60 & wait"))
    wait_for(kube, lambda _: "trapped" in kube.read_logs("j-5.1.0").data)  # SIGTERM is caught
    kube.stop("j-5.1.0", 5.0, "preempted")
    fake.wait_gone("default", fake.received[0]["metadata"]["name"])
    assert "got-term" in (tmp_path / "pods" / fake.logs()[0]).read_text()
    done = wait_for(kube, lambda s: s["j-5.1.0"].state is AttemptState.EXITED)
    assert done["j-5.1.0"].exit_code in (0, 143)
    kube.start(spec("j-6.1.0", "trap '' TERM; sleep 60"))
    wait_for(kube, lambda s: s["j-6.1.0"].started_at is not None)
    began = time.monotonic()
    kube.stop("j-6.1.0", 1.0, "preempted")
    wait_for(kube, lambda s: s["j-6.1.0"].state is AttemptState.EXITED)
    assert time.monotonic() - began >= 1.0  # it ignored SIGTERM: killed after the grace


def test_with_kueue_a_job_waits_suspended_until_admitted(fake: FakeKubeApi, tmp_path: Path) -> None:
    kube = backend(fake, tmp_path, queue="team-llm")
    kube.start(spec("j-7.1.0", "echo admitted"))
    queued = wait_for(kube, lambda s: s["j-7.1.0"].waiting_reason is not None)["j-7.1.0"]
    assert queued.waiting_reason == "waiting for Kueue admission"
    assert fake.received[0]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-llm"
    fake.admit("default", fake.received[0]["metadata"]["name"])
    done = wait_for(kube, lambda s: s["j-7.1.0"].state is AttemptState.EXITED)
    assert done["j-7.1.0"].exit_code == 0


def test_an_api_that_does_not_answer_degrades_the_site_and_loses_nothing(
    fake: FakeKubeApi, tmp_path: Path
) -> None:
    kube = backend(fake, tmp_path)
    kube.start(spec("j-8.1.0", "sleep 2; echo done"))
    wait_for(kube, lambda s: s["j-8.1.0"].started_at is not None)
    fake.pause()
    met = wait_for(kube, lambda _: kube.problem() is not None)  # a poll that met the silence
    assert met["j-8.1.0"].state is AttemptState.RUNNING  # the last known
    problem = kube.problem()
    assert problem is not None and problem.startswith("the Kubernetes API does not answer")
    with pytest.raises(BackendError):
        kube.start(spec("j-9.1.0", "true"))
    fake.pause(False)
    done = wait_for(kube, lambda s: s["j-8.1.0"].state is AttemptState.EXITED)
    assert done["j-8.1.0"].exit_code == 0 and kube.problem() is None
    assert "done" in kube.read_logs("j-8.1.0").data


def test_a_job_the_api_refuses_degrades_the_site(fake: FakeKubeApi, tmp_path: Path) -> None:
    kube = backend(fake, tmp_path)
    with pytest.raises(BackendError, match="no A100"):
        kube.start(spec("j-10.1.0", "true", gpu_type="A100"))
    fake.nodes.clear()  # no node of the type any more
    kube._capacity_at = float("-inf")
    with pytest.raises(BackendError, match="no node"):
        kube.start(spec("j-11.1.0", "true"))


def test_a_restarted_backend_follows_the_jobs_it_made(fake: FakeKubeApi, tmp_path: Path) -> None:
    first = backend(fake, tmp_path)
    first.start(spec("j-12.1.0", "sleep 1; exit 4"))
    second = backend(fake, tmp_path)
    done = wait_for(second, lambda s: s["j-12.1.0"].state is AttemptState.EXITED)
    assert done["j-12.1.0"].exit_code == 4


def test_a_job_deleted_by_someone_else_is_lost(fake: FakeKubeApi, tmp_path: Path) -> None:
    kube = backend(fake, tmp_path)
    kube.start(spec("j-13.1.0", "sleep 30"))
    wait_for(kube, lambda s: s["j-13.1.0"].started_at is not None)
    name = fake.received[0]["metadata"]["name"]
    fake._handle(
        "DELETE", f"/apis/batch/v1/namespaces/default/jobs/{name}", {}, {"gracePeriodSeconds": 0}
    )
    done = wait_for(kube, lambda s: s["j-13.1.0"].state is not AttemptState.RUNNING)
    assert done["j-13.1.0"].state is AttemptState.LOST

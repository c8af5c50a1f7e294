"""One fabric, three kinds of cluster: Slurm at shanghai (a real cluster of
``scripts/slurm.sh``), Kubernetes at singapore (the fake API server of ``kube_fake``, a fake)
and local processes at tokyo.  A server and three ``onecluster agent`` processes, each running
the backend the fabric names for its site; one job per site lands there and completes."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fabric_stack import Stack, wait
from kube_fake import FakeKubeApi, FakeNode

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.integration]

FABRIC = Path(__file__).resolve().parents[2] / "examples" / "fabrics" / "three-site-mixed.yaml"


@pytest.fixture(scope="module")
def mixed(
    slurm_clusters: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, FakeKubeApi]]:
    work = tmp_path_factory.mktemp("mixed")
    (work / "pods").mkdir()
    kube = FakeKubeApi([FakeNode("sg-gpu-1", "NVIDIA-H100-80GB-HBM3", 4)], work / "pods")
    args = {
        "shanghai": ["--slurm-conf", str(slurm_clusters["shanghai"])],
        "singapore": ["--kubeconfig", str(kube.kubeconfig(work / "kubeconfig"))],
        "tokyo": [],
    }
    stack = Stack(work / "stack", FABRIC, args)
    try:
        wait("all sites up", lambda: set(stack.site_status().values()) == {"up"}, 60)
        yield stack, kube
    finally:
        stack.close()
        kube.close()


def test_each_site_runs_its_job_on_its_own_kind_of_cluster(
    mixed: tuple[Stack, FakeKubeApi],
) -> None:
    stack, kube = mixed
    backends = {s.name: s.backend for s in stack.admin.sites()}
    assert backends == {"shanghai": "slurm", "singapore": "kubernetes", "tokyo": "local"}
    script = 'echo "site=$ONECLUSTER_SITE"; sleep 1'
    asks = {
        "shanghai": ("llm", "H800"),
        "singapore": ("vision", "H100"),
        "tokyo": ("speech", "L40S"),
    }
    jobs = {
        site: stack.submit(
            team,
            name=f"on-{site}",
            gpus=2,
            gpu_types=[gpu_type],
            duration_s=60,
            command=["sh", "-c", script],
        )
        for site, (team, gpu_type) in asks.items()
    }
    for site, job in jobs.items():
        done = stack.until(job.id, "completed")
        assert done.parts[0].site == site and done.attempts == 1
        assert f"site={site}" in stack.admin.logs(job.id).data
    # the Kubernetes site got exactly one Job, for its own job, and it validated
    [manifest] = kube.received
    labels = manifest["metadata"]["labels"]
    assert labels["onecluster.io/job-id"] == jobs["singapore"].id

"""Three real Slurm clusters behind onecluster's queue, end to end.

A server process with ``examples/fabrics/three-site-slurm.yaml``, one ``onecluster agent
--backend slurm`` process per site on the clusters of ``scripts/slurm.sh``; jobs go in
through the API and are checked in Slurm itself (``squeue --json`` of the chosen site), in
their output (the GPUs Slurm gave them), in the job records and in ``onecluster report gpu``.
Then a borrowed job is preempted and completes later, and one site's ``slurmctld`` is killed:
the site is degraded, new work goes elsewhere, nothing is lost or started twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fabric_stack import Stack, wait

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
FABRIC = ROOT / "examples" / "fabrics" / "three-site-slurm.yaml"
SITES = ("shanghai", "singapore", "tokyo")

#: What every job prints: where it ran and the GPUs Slurm gave it.
PRINT = 'echo "cluster=$SLURM_CLUSTER_NAME gpus=$CUDA_VISIBLE_DEVICES job=$SLURM_JOB_ID"'


def slurm_jobs(conf: Path) -> list[dict[str, Any]]:
    """Every job the cluster of ``conf`` knows, from its own ``squeue --json``."""
    done = subprocess.run(
        ["squeue", "--states=all", "--json"],
        env={**os.environ, "SLURM_CONF": str(conf)},
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    jobs: list[dict[str, Any]] = json.loads(done.stdout)["jobs"]
    return jobs


def attempts_in_slurm(conf: Path, job_id: str) -> list[dict[str, Any]]:
    """The Slurm jobs of onecluster job ``job_id`` at that cluster, oldest first."""
    mine = [j for j in slurm_jobs(conf) if str(j["name"]).startswith(f"oc-{job_id}.")]
    return sorted(mine, key=lambda j: int(j["job_id"]))


def output(stack: Stack, job_id: str) -> str:
    return stack.admin.logs(job_id).data


@pytest.fixture(scope="module")
def stack(
    slurm_clusters: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    args = {site: ["--slurm-conf", str(conf)] for site, conf in slurm_clusters.items()}
    running = Stack(tmp_path_factory.mktemp("stack"), FABRIC, args)
    running.confs.update(slurm_clusters)
    try:
        wait("all sites up", lambda: set(running.site_status().values()) == {"up"}, 60)
        yield running
    finally:
        running.close()


def test_jobs_run_under_the_chosen_sites_slurm_with_their_gres_and_are_billed(
    stack: Stack,
) -> None:
    # One job per site, each only placeable there: H800 (shanghai), 4xH100 (singapore),
    # L40S (tokyo); and one the scheduler may place at either H100 site.
    asks = {
        "h800": ("llm", {"gpus": 2, "gpu_types": ["H800"]}),
        "h100x4": ("vision", {"gpus": 4, "gpu_types": ["H100"]}),
        "l40s": ("speech", {"gpus": 2, "gpu_types": ["L40S"]}),
        "any-h100": ("vision", {"gpus": 1, "gpu_types": ["H100"], "dataset": "imagenet-21k"}),
    }
    began = time.time()
    jobs = {
        name: stack.submit(
            team, name=name, duration_s=60, command=["sh", "-c", f"{PRINT}; sleep 2"], **ask
        )
        for name, (team, ask) in asks.items()
    }
    expected_site = {"h800": "shanghai", "h100x4": "singapore", "l40s": "tokyo"}
    for name, job in jobs.items():
        done = stack.until(job.id, "completed")
        site = done.parts[0].site
        if name in expected_site:
            assert site == expected_site[name]
        assert done.exit_code == 0 and done.attempts == 1
        # Slurm itself ran it, once, on that site's cluster, with the GRES asked for
        ran = attempts_in_slurm(stack.confs[site], job.id)
        assert len(ran) == 1, ran
        gpu_type = done.parts[0].gpu_type.lower()
        assert ran[0]["tres_per_node"] == f"gres:gpu:{gpu_type}:{job.gpus}"
        assert ran[0]["job_state"] == "COMPLETED"
        for other in set(SITES) - {site}:
            assert attempts_in_slurm(stack.confs[other], job.id) == []
        text = output(stack, job.id)
        assert f"cluster={site} " in text, text
        gpus = text.split("gpus=", 1)[1].split()[0]
        assert len(gpus.split(",")) == job.gpus, text
        assert f"job={ran[0]['job_id']}" in text

    # The bill of every month the jobs ran in (a month may end during the test).
    months = sorted({time.strftime("%Y-%m", time.gmtime(t)) for t in (began, time.time())})
    by_site: dict[str, dict[str, float]] = {}
    by_team: dict[str, dict[str, float]] = {}
    reports = []
    for month in months:
        argv = ["--server", stack.url, "report", "gpu", "--month", month, "--format", "json"]
        shown = subprocess.run(
            [*stack.cli, *argv],
            env={**os.environ, "ONECLUSTER_TOKEN": stack.admin_token},
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        reports.append(json.loads(shown.stdout))
        for key, into in (("sites", by_site), ("teams", by_team)):
            for row in reports[-1][key]:
                total = into.setdefault(row["name"], {"gpu_hours": 0.0})
                total["gpu_hours"] += row["gpu_hours"]
    report = {"months": reports}
    for site in SITES:
        assert by_site[site]["gpu_hours"] > 0, report
    # Slurm's own run times are whole seconds: 2 s of sleep is 2 or 3 s of GPU time
    h800 = 2 * 2 / 3600
    assert h800 * 0.9 <= by_team["llm"]["gpu_hours"] <= 2 * 4 / 3600 + 1e-3, report


def test_a_borrowed_job_is_preempted_requeued_and_completes_later(
    stack: Stack, tmp_path: Path
) -> None:
    # speech has no H800 quota: its job borrows shanghai's idle H800s, pre-emptible.  It runs
    # until the test lets it end, so it is surely running when the owner wants the GPUs.
    go = tmp_path / "go"
    borrower = stack.submit(
        "speech",
        name="borrower",
        gpus=4,
        gpu_types=["H800"],
        duration_s=60,
        command=["sh", "-c", f"{PRINT}; while [ ! -e {go} ]; do sleep 0.1; done"],
    )
    running = wait(
        "the borrower to run in Slurm",
        lambda: any(
            j["job_state"] == "RUNNING"
            for j in attempts_in_slurm(stack.confs["shanghai"], borrower.id)
        ),
    )
    assert running
    assert stack.job(borrower.id).borrowed
    owner = stack.submit(
        "llm",
        name="owner",
        gpus=4,
        gpu_types=["H800"],
        priority="high",
        duration_s=60,
        command=["sh", "-c", f"{PRINT}; sleep 2"],
    )
    stack.until(owner.id, "completed")
    go.touch()
    done = stack.until(borrower.id, "completed")
    assert done.preemptions == 1 and done.attempts == 2
    runs = attempts_in_slurm(stack.confs["shanghai"], borrower.id)
    # the first run was stopped by onecluster: SIGTERM, then scancel after the grace. A job
    # that exits on the SIGTERM (sh: 143) is FAILED to Slurm, one cancelled past it CANCELLED
    assert [r["job_state"] for r in runs][1:] == ["COMPLETED"], runs
    assert runs[0]["job_state"] in ("FAILED", "CANCELLED"), runs
    # the owner ran between the borrower's two runs, never beside it on the same 4 GPUs
    owner_run = attempts_in_slurm(stack.confs["shanghai"], owner.id)[0]
    assert runs[0]["end_time"] <= owner_run["start_time"] <= owner_run["end_time"]
    assert owner_run["end_time"] <= runs[1]["start_time"]


def test_a_site_whose_slurmctld_dies_is_degraded_and_loses_nothing(
    stack: Stack, tmp_path: Path
) -> None:
    conf = stack.confs["shanghai"]
    go = tmp_path / "go"  # the survivor runs until the test lets it end
    survivor = stack.submit(
        "llm",
        name="survivor",
        gpus=2,
        gpu_types=["A100"],
        duration_s=60,
        command=["sh", "-c", f"{PRINT}; while [ ! -e {go} ]; do sleep 0.1; done"],
    )
    started = wait(
        "the survivor to run",
        lambda: next(
            (j for j in attempts_in_slurm(conf, survivor.id) if j["job_state"] == "RUNNING"),
            None,
        ),
    )
    # A SIGKILL loses what slurmctld had not saved yet (Slurm would then run the job a second
    # time and drain the node: its own limit, not onecluster's).  slurmctld saves its state
    # soon after a change to a job, so change one (a comment) now that the survivor runs, and
    # kill it once that save is on disk.
    saved = conf.parent / "spool" / "job_state"
    asked = time.time()
    subprocess.run(
        ["scontrol", "update", f"JobId={started['job_id']}", "Comment=saved-running"],
        env={**os.environ, "SLURM_CONF": str(conf)},
        check=True,
        capture_output=True,
        timeout=30,
    )
    wait(
        "slurmctld to save the running job",
        lambda: saved.exists() and saved.stat().st_mtime > asked,
        20,
    )
    pid = int((conf.parent / "slurmctld.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    try:
        wait("shanghai degraded", lambda: stack.site_status()["shanghai"] == "degraded", 30)
        site = next(s for s in stack.admin.sites() if s.name == "shanghai")
        assert site.problem is not None and "Slurm does not answer" in site.problem
        # llm's home is shanghai, but it takes no work now: A100 or H100 elsewhere
        moved = stack.submit(
            "llm",
            name="moved",
            gpus=1,
            gpu_types=["A100", "H100"],
            duration_s=60,
            command=["sh", "-c", f"{PRINT}; sleep 1"],
        )
        done = stack.until(moved.id, "completed")
        assert done.parts[0].site in ("singapore", "tokyo")
        assert stack.job(survivor.id).state == "running"  # the site is degraded, not lost
    finally:
        # slurmctld comes back with its saved state; the script restarts only what is down
        subprocess.run(
            [str(ROOT / "scripts" / "slurm.sh"), "start"],
            env={**os.environ, "ONECLUSTER_SLURM_DIR": str(conf.parent.parent)},
            check=True,
            capture_output=True,
            timeout=120,
        )
    wait("shanghai up again", lambda: stack.site_status()["shanghai"] == "up", 60)
    go.touch()
    done = stack.until(survivor.id, "completed")
    assert done.attempts == 1 and done.exit_code == 0
    runs = attempts_in_slurm(conf, survivor.id)
    assert [r["job_state"] for r in runs] == ["COMPLETED"], runs
    assert output(stack, survivor.id).count("cluster=shanghai") == 1

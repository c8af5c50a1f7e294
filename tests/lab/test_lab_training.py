"""One model trained over two lab sites joined by an emulated 68 ms circuit (root, slow):
``onecluster train`` starts the gang through the scheduler; per-step DDP and DiLoCo run the
same example; the WAN bytes per step differ by H × (32 / 8 bits); the loss falls; a site
whose worker is killed is left out, then heals from the other and rejoins; the server is
killed and started again meanwhile, and the gang trains on.

Everything is asserted on structure (bytes, rounds, who took part), never on timings."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.lab.conftest import needs_lab_host, running_lab, wait_for
from typer.testing import CliRunner

from onecluster.cli import build_app
from onecluster.client import Client
from onecluster.lab import Lab

pytestmark = [pytest.mark.lab, pytest.mark.slow, needs_lab_host]

TWO_SITES = """\
fabric: two-site-train
sites:
  - {name: singapore, region: ap-southeast-1, jurisdiction: SG, backend: local,
     pools: [{gpu_type: H100, count: 1, cost_per_gpu_hour: 1.6}]}
  - {name: tokyo, region: ap-northeast-1, jurisdiction: JP, backend: local,
     pools: [{gpu_type: H100, count: 1, cost_per_gpu_hour: 3.2}]}
circuits:
  - {name: sin-tyo, between: [singapore, tokyo], capacity_gbps: 1, rtt_ms: 68,
     loss: 0.0, distance_km: 6900, risk_group: direct}
teams:
  - {name: llm, home_site: singapore, weight: 1, quota: {H100: 2}}
"""
SHAKESPEARE = Path(__file__).resolve().parents[3] / "shared/data/text/tinyshakespeare.txt"
H = 10


@pytest.fixture(scope="module")
def lab_and_admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lab, Client]]:
    fabric = tmp_path_factory.mktemp("fabric") / "two-site.yaml"
    fabric.write_text(TWO_SITES)
    with running_lab(fabric) as both:
        yield both


def train(lab: Lab, admin: Client, name: str, metrics: Path, *worker_args: str) -> str:
    """``onecluster train`` of the example over both sites; the job's id."""
    status = lab.status()
    assert status.server_url is not None
    token = status.admin_token_file.read_text().strip()
    data = ["--data", str(SHAKESPEARE)] if SHAKESPEARE.exists() else []
    result = CliRunner().invoke(
        build_app(),
        [
            "--server",
            status.server_url,
            "--token",
            token,
            "train",
            "--team",
            "llm",
            "--gpu-type",
            "H100",
            "--sites",
            "2",
            "--gpus-per-site",
            "1",
            "--name",
            name,
            "--duration",
            "1h",
            "--json",
            "--",
            sys.executable,
            "-m",
            "onecluster.training.chargpt",
            *data,
            "--metrics",
            str(metrics),
            "--eval-every",
            "0",
            "--peer-timeout",
            "3",
            "--rendezvous-timeout",
            "120",
            "--heal-timeout",
            "120",
            "--sync-timeout",
            "120",
            *worker_args,
        ],
    )
    assert result.exit_code == 0, result.stderr
    job: dict[str, Any] = json.loads(result.stdout)
    return str(job["id"])


def events(metrics: Path) -> list[dict[str, Any]]:
    if not metrics.exists():
        return []
    return [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]


def finished(admin: Client, job_id: str, timeout: float = 300) -> None:
    wait_for(
        lambda: admin.job(job_id).state in ("completed", "failed", "cancelled"),
        timeout,
        f"job {job_id}",
    )
    job = admin.job(job_id)
    assert job.state == "completed", (job.state, job.reason, admin.logs(job_id).data[-3000:])
    assert sorted(p.site for p in job.parts) == ["singapore", "tokyo"]


def test_diloco_over_the_circuit_survives_a_killed_site_with_h_times_fewer_bytes(
    lab_and_admin: tuple[Lab, Client], tmp_path: Path
) -> None:
    lab, admin = lab_and_admin
    tmp_path.chmod(0o777)

    # Per-step DDP across the circuit: the reference for the bytes.
    ddp_metrics = tmp_path / "ddp.jsonl"
    finished(admin, train(lab, admin, "ddp", ddp_metrics, "--mode", "ddp", "--steps", "20"))
    ddp_end = {e["site"]: e for e in events(ddp_metrics) if e["event"] == "end"}
    assert set(ddp_end) == {"singapore", "tokyo"}
    ddp_per_step = (ddp_end["singapore"]["sync_sent"] + ddp_end["singapore"]["sync_received"]) / 20

    # DiLoCo, H = 10, int8: tokyo's worker is killed after its second round.
    metrics = tmp_path / "diloco.jsonl"
    job_id = train(
        lab, admin, "diloco", metrics, "--sync-every", str(H), "--bits", "8", "--steps", "1200"
    )

    def tokyo_rounds() -> int:
        return sum(1 for e in events(metrics) if e["event"] == "round" and e["site"] == "tokyo")

    wait_for(lambda: tokyo_rounds() >= 2, 240, "two rounds at tokyo")
    victim = next(
        e["pid"] for e in events(metrics) if e["event"] == "start" and e["site"] == "tokyo"
    )
    os.kill(victim, signal.SIGKILL)
    wait_for(  # its first heal was the start's; the second, after the kill
        lambda: (
            sum(1 for e in events(metrics) if e["event"] == "healed" and e["site"] == "tokyo") >= 2
        ),
        180,
        "tokyo healed after the kill",
    )
    # The scheduler restarts (a crash) while the gang trains: the gang never notices.
    restarted_at = time.time()
    lab.server_restart()
    finished(admin, job_id)

    seen = events(metrics)
    sin = [e for e in seen if e["site"] == "singapore"]
    tyo = [e for e in seen if e["site"] == "tokyo"]
    sin_rounds = [e for e in sin if e["event"] == "round"]
    # The survivor went on alone, without a restart, then with the returning site.
    assert [e for e in sin if e["event"] == "start"] == sin[:1]
    alone = [i for i, e in enumerate(sin_rounds) if e["sites"] == ["singapore"]]
    assert alone, "singapore never committed a round without tokyo"
    assert any(e["sites"] == ["singapore", "tokyo"] for e in sin_rounds[alone[0] :])
    # Tokyo's launcher restarted its worker, which healed from singapore.
    starts = [e for e in tyo if e["event"] == "start"]
    assert len(starts) == 2 and starts[1]["pid"] != victim
    healed = [e for e in tyo if e["event"] == "healed"]  # at its start, then after the kill
    assert [e["source"] for e in healed] == ["singapore", "singapore"]
    assert healed[1]["ts"] > starts[1]["ts"]
    assert tyo[-1]["event"] == "end" and sin[-1]["event"] == "end"
    assert any(
        e["ts"] > restarted_at and e["sites"] == ["singapore", "tokyo"] for e in sin_rounds
    ), "no round of both sites after the server's restart"
    # The loss fell.
    losses = [e["loss"] for e in sin if e["event"] == "step"]
    assert sum(losses[-3:]) / 3 < 0.8 * sum(losses[:3]) / 3
    assert sin[-1]["val_loss"] < losses[0]
    # WAN bytes: a round of both sites moves what one DDP step moves, / (32 / 8 bits);
    # DiLoCo has one round per H steps.
    # Counted round by round between two consecutive rounds of both sites (the kill, the
    # heal and a late part's answer move bytes of their own), the usual round's bytes.
    moved = [e["sync_sent"] + e["sync_received"] for e in sin_rounds]
    per_round = sorted(
        moved[i + 1] - moved[i]
        for i in range(len(sin_rounds) - 1)
        if len(sin_rounds[i]["sites"]) == len(sin_rounds[i + 1]["sites"]) == 2
    )
    diloco_per_step = per_round[len(per_round) // 2] / H
    assert ddp_per_step / diloco_per_step == pytest.approx(H * 4, rel=0.01)

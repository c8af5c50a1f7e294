"""``onecluster jobs ID --why``: against a real server (no agents: every site is down, jobs
stay queued; the server is ``conftest.py``'s), and the rendering of a busier explanation."""

from __future__ import annotations

import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

from onecluster.cli import build_app
from onecluster.cli._why import why_view
from onecluster.schema import WhyOut


def _cli(server: tuple[str, str], *args: str) -> tuple[int, str, str]:
    url, admin = server
    result = CliRunner().invoke(
        build_app(), ["--server", url, "--token", admin, *args], env={"COLUMNS": "200"}
    )
    return result.exit_code, result.stdout, result.stderr


def _rows(text: str) -> list[list[str]]:
    """The cells of each line of a rendered table (split on the table's bars)."""
    return [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines()]


def _submit(server: tuple[str, str]) -> str:
    code, out, err = _cli(
        server,
        *("submit", "--team", "llm", "--gpus", "8", "--gpu-type", "H800", "--duration", "1h"),
        *("--quiet", "--", "python", "train.py"),
    )
    assert code == 0, err
    return out.strip()


@pytest.mark.integration
def test_why_prints_the_summary_the_standing_and_every_pool(server: tuple[str, str]) -> None:
    job_id = _submit(server)
    code, out, err = _cli(server, "jobs", job_id, "--why")
    assert code == 0, err
    assert f"job {job_id} (team llm, 8 × H800, normal): first in line; needs 8 H800" in out
    assert "no site that could run it takes work now; shanghai is down" in out
    assert "not reached: the pass ran out of GPUs before it" in out
    assert "H800 at any site: 0 in use, 0 borrowed beyond it" in out
    [row] = [cells for cells in _rows(out) if cells[:1] == ["shanghai"]]
    assert row[:5] == ["shanghai", "H800", "down", "384", "0"]
    code, out, _ = _cli(server, "jobs", job_id, "--why", "--json")
    assert code == 0
    body = json.loads(out)
    assert (body["job_id"], body["verdict"], body["ahead"]) == (job_id, "not_reached", 0)
    assert [p["site"] for p in body["pools"]] == ["shanghai"]


@pytest.mark.integration
def test_why_refuses_what_it_cannot_explain(server: tuple[str, str]) -> None:
    code, _, err = _cli(server, "jobs", "--why")
    assert code == 2 and "--why explains one job: give its id" in err
    code, _, err = _cli(server, "jobs", "j-does-not-exist", "--why")
    assert code == 3 and "error:" in err
    job_id = _submit(server)
    assert _cli(server, "cancel", job_id)[0] == 0
    code, _, err = _cli(server, "jobs", job_id, "--why")
    assert code == 4
    assert f"job {job_id} is cancelled, not pending" in err


BUSY = {
    "job_id": "j-2",
    "team": "vision",
    "gpus": 8,
    "gpu_types": ["H100"],
    "priority_class": "normal",
    "policy": "unified",
    "now": 1_000.0,
    "waited_s": 5400.0,
    "usage_gpus": 12.5,
    "weight": 1.0,
    "fair_factor": 0.42,
    "age_factor": 0.01,
    "priority": 4210.0,
    "pending": 9,
    "ahead": 3,
    "ahead_higher_class": 0,
    "ahead_same_class": 3,
    "teams_ahead": [{"team": "nlp", "priority": 9100.0, "jobs": 3, "gpus": 24}],
    "home_site": "singapore",
    "guarantee": [{"gpu_type": "H100", "site": None, "gpus": 64, "used": 60, "borrowed": 0}],
    "pools": [
        {
            "site": "singapore",
            "gpu_type": "H100",
            "status": "up",
            "gpus": 384,
            "free": 5,
            "left": 0,
            "draining": 0,
            "borrowed": 40,
            "reserved": {"job_id": "j-1", "gpus": 16, "start_at": 4_600.0},
            "terms": "quota",
            "frees_within_grace": False,
            "staging_bytes": 0,
            "staging_s": 0.0,
        },
        {
            "site": "tokyo",
            "gpu_type": "H100",
            "status": "closed",
            "gpus": 192,
            "free": 0,
            "left": 0,
            "draining": 0,
            "borrowed": 0,
            "reserved": None,
            "terms": "borrowed",
            "frees_within_grace": False,
            "staging_bytes": 2_000_000_000,
            "staging_s": None,
        },
    ],
    "verdict": "reclaims",
    "starts": [],
    "borrowed": False,
    "reclaims": [
        {"job_id": "j-9", "team": "llm", "site": "singapore", "gpus": 8, "reason": "reclaimed"}
    ],
    "held_for": [],
    "behind": None,
    "reserved": [],
    "expected_start_at": None,
    "grace_s": 30.0,
    "summary": "waits behind 3 jobs of higher priority (team nlp 9100 vs yours 4210); …",
}


def test_a_busy_explanation_renders_victims_reservations_and_data() -> None:
    console = Console(record=True, width=200)
    console.print(why_view(WhyOut.model_validate(BUSY)))
    text = console.export_text()
    assert "job j-2 (team vision, 8 × H100, normal): waits behind 3 jobs" in text
    assert (
        "reclaims GPUs by preemption; starts once they are free: j-9 (llm, 8 at singapore)" in text
    )
    assert "30 s grace" in text
    assert "3 of 9 pending jobs go first (0 of a higher class, 3 of its class)" in text
    assert "nlp 9100 (3 jobs, 24 GPUs)" in text
    assert "64 H100 at any site: 60 in use, 0 borrowed beyond it" in text
    rows = {cells[0]: " ".join(cells) for cells in _rows(text) if cells}
    assert "j-1 (16, 1970-01-01 01:16:40)" in rows["singapore"]
    assert "in quota" in rows["singapore"]
    assert "cannot get there" in rows["tokyo"] and "closed" in rows["tokyo"]

"""``--checkpoint-every`` and ``--checkpoint-on-sigterm`` of ``submit`` and ``train``, what
``jobs ID`` shows of them and the lost GPU-hours of ``report gpu``, against a real `onecluster
server` process on loopback (the server is ``conftest.py``'s)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from onecluster.cli import build_app

pytestmark = pytest.mark.integration

SUBMIT = ("submit", "--team", "llm", "--gpus", "8", "--duration", "2h")
TRAIN = ("train", "--team", "llm", "--sites", "2", "--gpus-per-site", "8")


def _cli(server: tuple[str, str], *args: str) -> tuple[int, str, str]:
    url, admin = server
    result = CliRunner().invoke(
        build_app(), ["--server", url, "--token", admin, *args], env={"COLUMNS": "200"}
    )
    return result.exit_code, result.stdout, result.stderr


def _job_ids(server: tuple[str, str]) -> list[str]:
    code, out, err = _cli(server, "jobs", "--json")
    assert code == 0, err
    return [job["id"] for job in json.loads(out)]


def test_submit_declares_the_jobs_checkpoints_and_jobs_shows_them(
    server: tuple[str, str],
) -> None:
    code, out, err = _cli(
        server,
        *SUBMIT,
        "--checkpoint-every",
        "30m",
        "--checkpoint-on-sigterm",
        "--json",
        "--",
        "python",
        "train.py",
    )
    assert code == 0, err
    job = json.loads(out)
    assert (job["checkpoint_interval_s"], job["checkpoint_on_sigterm"]) == (1800, True)
    code, shown, _ = _cli(server, "jobs", job["id"])
    assert code == 0
    lines = {line.split()[0]: line.split()[1:] for line in shown.splitlines() if line.strip()}
    assert lines["checkpoint_interval_s"] == ["30m00s"]
    assert lines["checkpoint_on_sigterm"] == ["True"]

    code, out, err = _cli(server, *SUBMIT, "--json", "--", "true")
    assert code == 0, err
    plain = json.loads(out)
    assert (plain["checkpoint_interval_s"], plain["checkpoint_on_sigterm"]) == (None, False)
    code, shown, _ = _cli(server, "jobs", plain["id"])
    lines = {line.split()[0]: line.split()[1:] for line in shown.splitlines() if line.strip()}
    assert (lines["checkpoint_interval_s"], lines["checkpoint_on_sigterm"]) == (["-"], ["False"])


def test_train_declares_the_runs_checkpoints(server: tuple[str, str]) -> None:
    code, out, err = _cli(
        server, *TRAIN, "--checkpoint-every", "600", "--json", "--", "python", "train.py"
    )
    assert code == 0, err
    job = json.loads(out)
    assert (job["max_sites"], job["checkpoint_interval_s"], job["checkpoint_on_sigterm"]) == (
        2,
        600,
        False,
    )
    code, out, err = _cli(server, *TRAIN, "--checkpoint-on-sigterm", "--json", "--", "x")
    assert code == 0, err
    assert (json.loads(out)["checkpoint_interval_s"], json.loads(out)["checkpoint_on_sigterm"]) == (
        None,
        True,
    )


@pytest.mark.parametrize(
    ("command", "every", "message"),
    [
        (SUBMIT, "soon", "the checkpoint interval 'soon' is not a positive duration"),
        (SUBMIT, "0", "the checkpoint interval '0' is not a positive duration"),
        (SUBMIT, "-5m", "the checkpoint interval '-5m' is not a positive duration"),
        (SUBMIT, "", "the checkpoint interval '' is not a positive duration"),
        (TRAIN, "nan", "the checkpoint interval 'nan' is not a positive duration"),
        (SUBMIT, "0.5", "invalid value for checkpoint_interval_s: Input should be greater than"),
        (TRAIN, "60d", "invalid value for checkpoint_interval_s: Input should be less than or"),
    ],
)
def test_a_bad_checkpoint_interval_is_refused_before_anything_is_sent(
    server: tuple[str, str], command: tuple[str, ...], every: str, message: str
) -> None:
    before = _job_ids(server)
    code, out, err = _cli(server, *command, "--checkpoint-every", every, "--", "x")
    assert code == 2, (out, err)
    assert message in " ".join(err.split())
    assert _job_ids(server) == before


def test_the_gpu_report_shows_the_gpu_hours_lost_to_preemption(server: tuple[str, str]) -> None:
    code, out, err = _cli(server, "report", "gpu", "--month", "2026-01", "--format", "json")
    assert code == 0, err
    assert {t["name"]: t["lost_gpu_hours"] for t in json.loads(out)["teams"]} == {
        "llm": 0.0,
        "vision": 0.0,
        "speech": 0.0,
    }
    code, out, _ = _cli(server, "report", "gpu", "--month", "2026-01", "--format", "csv")
    assert code == 0 and out.splitlines()[0].endswith(",jobs,lost_gpu_hours")
    code, out, _ = _cli(server, "report", "gpu", "--month", "2026-01")
    assert code == 0 and "LOST GPU-H" in out and "0.0 GPU-h lost to preemption" in out

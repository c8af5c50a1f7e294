"""``onecluster train`` against a real `onecluster server` process on loopback (no agents:
jobs stay queued; the server is ``conftest.py``'s)."""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

from onecluster.cli import build_app

pytestmark = pytest.mark.integration

TRAIN = ("train", "--team", "llm", "--gpu-type", "H100")


def _cli(server: tuple[str, str], *args: str) -> tuple[int, str, str]:
    url, admin = server
    result = CliRunner().invoke(
        build_app(), ["--server", url, "--token", admin, *args], env={"COLUMNS": "200"}
    )
    return result.exit_code, result.stdout, result.stderr


def _job_names(server: tuple[str, str]) -> list[str]:
    code, out, err = _cli(server, "jobs", "--json")
    assert code == 0, err
    return [job["name"] for job in json.loads(out)]


def test_train_submits_one_gang_over_the_sites_running_the_launcher(
    server: tuple[str, str],
) -> None:
    code, out, err = _cli(
        server,
        *TRAIN,
        "--sites",
        "2",
        "--gpus-per-site",
        "8",
        "--name",
        "llama-2site",
        "--duration",
        "6h",
        "--priority",
        "high",
        "--json",
        "--",
        "python",
        "train.py",
        "--lr",
        "3e-4",
    )
    assert code == 0, err
    job = json.loads(out)
    assert (job["name"], job["team"], job["gpus"], job["max_sites"]) == (
        "llama-2site",
        "llm",
        16,
        2,
    )
    assert (job["gpu_types"], job["duration_s"], job["priority"]) == (["H100"], 21600, "high")
    assert job["command"] == [
        sys.executable,
        "-m",
        "onecluster.training",
        "launch",
        "--",
        "python",
        "train.py",
        "--lr",
        "3e-4",
    ]
    code, shown, _ = _cli(server, "jobs", job["id"])
    assert code == 0 and "onecluster.training launch -- python train.py" in shown


def test_train_says_what_it_submitted_and_how_the_workers_meet(server: tuple[str, str]) -> None:
    code, out, err = _cli(
        server, *TRAIN, "--sites", "1", "--gpus-per-site", "4", "--", "python", "[x].py"
    )
    assert code == 0, err
    first, what, meet = out.splitlines()
    assert first.startswith("submitted job j-") and first.endswith("(train, pending)")
    assert what == "  4 GPUs on at most 1 site (about 4 each), one worker per GPU: python '[x].py'"
    assert "$ONECLUSTER_GANG_*" in meet
    code, out, _ = _cli(server, *TRAIN, "--sites", "3", "--gpus-per-site", "2", "-q", "--", "x")
    assert code == 0 and out.startswith("j-") and len(out.splitlines()) == 1


def test_train_without_a_command_is_refused_and_submits_nothing(server: tuple[str, str]) -> None:
    before = _job_names(server)
    code, out, err = _cli(
        server, *TRAIN, "--sites", "2", "--gpus-per-site", "8", "--name", "no-command"
    )
    assert code == 2
    assert out == ""
    assert "train needs the command each worker runs" in err and "hint:" in err
    code, _, err = _cli(
        server, *TRAIN, "--sites", "2", "--gpus-per-site", "8", "--name", "no-command", "--"
    )
    assert code == 2 and "train needs the command" in err
    assert _job_names(server) == before
    assert "no-command" not in before


@pytest.mark.parametrize(
    ("option", "value"), [("--sites", "0"), ("--gpus-per-site", "0"), ("--gpus-per-site", "-1")]
)
def test_train_refuses_a_gang_of_no_gpus(server: tuple[str, str], option: str, value: str) -> None:
    shape = {"--sites": "2", "--gpus-per-site": "8", option: value}
    before = _job_names(server)
    code, _, err = _cli(server, *TRAIN, *(x for kv in shape.items() for x in kv), "--", "x")
    assert code == 2 and option in err
    assert _job_names(server) == before

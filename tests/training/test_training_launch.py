"""The site launcher and the example as real processes on loopback: two sites of two workers
each (the update is cut over a site's workers, then gathered), and bad input at the door."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def launch(
    site_rank: int, port: int, metrics: Path, *args: str, workers: int = 2
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "ONECLUSTER_GANG_SITES": "east,west",
        "ONECLUSTER_GANG_RANK": str(site_rank),
        "ONECLUSTER_GANG_PORT": str(port),
        "ONECLUSTER_GPUS": str(workers),
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "onecluster.training",
            "launch",
            "--",
            sys.executable,
            "-m",
            "onecluster.training.chargpt",
            "--metrics",
            str(metrics),
            "--eval-every",
            "0",
            "--rendezvous-timeout",
            "60",
            *args,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def test_two_sites_of_two_workers_end_with_one_model(base_port: int, tmp_path: Path) -> None:
    metrics = tmp_path / "m.jsonl"
    procs = [
        launch(r, base_port, metrics, "--steps", "20", "--sync-every", "10", "--width", "32")
        for r in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err.decode()[-2000:]
    seen = [json.loads(line) for line in metrics.read_text().splitlines()]
    ends = [e for e in seen if e["event"] == "end"]
    assert sorted((e["site"], e["worker"]) for e in ends) == [
        ("east", 0),
        ("east", 1),
        ("west", 0),
        ("west", 1),
    ]
    assert len({e["val_loss"] for e in ends}) == 1  # every worker holds the same weights
    rounds = [e for e in seen if e["event"] == "round"]
    assert len(rounds) == 8 and all(e["sites"] == ["east", "west"] for e in rounds)
    # Each worker carried half of the update: its shard, not the whole vector.
    by_worker = {(e["site"], e["worker"]): e["sync_sent"] + e["sync_received"] for e in ends}
    assert max(by_worker.values()) < 0.6 * sum(by_worker.values()) / 2


def test_the_launcher_refuses_an_empty_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "onecluster.training", "launch", "--"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "no worker command" in done.stderr


def test_a_worker_with_a_malformed_gang_says_which_variable(tmp_path: Path) -> None:
    env = {**os.environ, "ONECLUSTER_GANG_SITES": "a,b", "ONECLUSTER_GANG_RANK": "5"}
    done = subprocess.run(
        [sys.executable, "-m", "onecluster.training.chargpt"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 3  # permanent: the launcher does not restart it
    assert "site rank 5 is not in 0..1" in done.stderr


def test_the_example_refuses_a_file_that_is_not_tinyshakespeare(tmp_path: Path) -> None:
    other = tmp_path / "other.txt"
    other.write_text("not shakespeare\n" * 100)
    done = subprocess.run(
        [sys.executable, "-m", "onecluster.training.chargpt", "--data", str(other)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 3
    assert "is not TinyShakespeare (sha256 differs)" in done.stderr


@pytest.mark.parametrize(
    ("env", "options", "says"),
    [
        ({"ONECLUSTER_GANG_SITES": "a,b", "ONECLUSTER_GANG_RANK": "7"}, [], "site rank 7"),
        ({"ONECLUSTER_GPUS": "two"}, [], "ONECLUSTER_GPUS is 'two'"),
        ({}, ["--prometheus", "x:y"], "'x:y' is not HOST:PORT"),
    ],
)
def test_the_launcher_refuses_a_malformed_gang_or_option_for_good(
    env: dict[str, str], options: list[str], says: str
) -> None:
    """It exited 1 with a traceback, and its own launcher would have tried again."""
    done = subprocess.run(
        [sys.executable, "-m", "onecluster.training", "launch", *options, "--", "true"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 3
    assert says in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("name", ["missing.txt", "."])
def test_the_example_refuses_data_it_cannot_read(tmp_path: Path, name: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "onecluster.training.chargpt",
            "--data",
            str(tmp_path / name),
            "--no-check",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 3
    assert "cannot read the text" in done.stderr and "Traceback" not in done.stderr

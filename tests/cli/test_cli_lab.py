"""``lab`` and ``links check --fabric`` without a server: root is required and said so; a
missing lab is a clear 'not found'; the offline planning check and its exit status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from onecluster.cli import build_app

ROOT = Path(__file__).resolve().parents[2]
THREE = str(ROOT / "examples/fabrics/three-site.yaml")
METRO = str(ROOT / "examples/fabrics/four-site-metro.yaml")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(build_app(), list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.stdout, result.stderr


def test_the_lab_says_clearly_that_it_needs_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    code, _, err = run("lab", "up", "--fabric", THREE)
    assert code == 5
    assert "needs root" in err and "sudo" in err
    code, _, err = run("lab", "cut", "shanghai", "singapore")
    assert code == 5 and "needs root" in err


def test_a_lab_that_is_not_there_is_not_found() -> None:
    code, _, err = run("lab", "status", "--name", "nosuch")
    assert code == 3
    assert "no lab 'nosuch'" in err and "lab up --fabric" in err


def test_lab_up_needs_a_fabric_or_a_site() -> None:
    code, _, err = run("lab", "up")
    assert code == 2 and "either --fabric" in err
    code, _, err = run("lab", "flap", "a", "b", "--period", "1", "--down", "2")
    assert code == 2 and "shorter than --period" in err


def test_the_offline_planning_check_flags_a_plan_that_holds_only_on_the_primary() -> None:
    code, out, err = run("links", "check", "--fabric", THREE)
    assert code == 9  # its own exit code: 1 means a bug
    assert "primary-only" in out and "shanghai → singapore → tokyo" in out
    assert "shanghai–tokyo (primary-only)" in err
    code, out, _ = run("links", "check", "--fabric", METRO, "--json")
    checks = {(c["a"], c["b"]): c for c in json.loads(out)}
    assert checks[("metro-east", "metro-west")]["verdict"] == "ok"
    assert checks[("metro-east", "metro-west")]["max_rtt_ms"] == 1.0
    failing = [c for c in checks.values() if c["max_rtt_ms"] is not None and c["verdict"] != "ok"]
    assert code == (9 if failing else 0)

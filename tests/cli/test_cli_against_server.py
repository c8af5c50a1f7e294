"""The CLI against a real `onecluster server` process on loopback (no agents: jobs stay queued;
the server is ``conftest.py``'s)."""

from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from onecluster.cli import build_app

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _cli(server: tuple[str, str], *args: str, token: str | None = None) -> tuple[int, str, str]:
    url, admin = server
    result = CliRunner().invoke(
        build_app(), ["--server", url, "--token", token or admin, *args], env={"COLUMNS": "200"}
    )
    return result.exit_code, result.stdout, result.stderr


def test_sites_lists_the_fabric(server: tuple[str, str]) -> None:
    code, out, _ = _cli(server, "sites", "--json")
    assert code == 0
    assert [s["name"] for s in json.loads(out)] == ["shanghai", "singapore", "tokyo"]
    code, out, _ = _cli(server, "sites")
    assert code == 0
    assert "H800 0/384" in out


def test_submit_list_show_cancel(server: tuple[str, str]) -> None:
    code, out, err = _cli(
        server,
        "submit",
        "--team",
        "llm",
        "--gpus",
        "8",
        "--gpu-type",
        "H800",
        "--gpu-type",
        "A100",
        "--duration",
        "2h",
        "--priority",
        "high",
        "--name",
        "train-1",
        "--json",
        "--",
        "python",
        "train.py",
    )
    assert code == 0, err
    job = json.loads(out)
    assert (job["team"], job["gpus"], job["duration_s"], job["priority"]) == (
        "llm",
        8,
        7200,
        "high",
    )
    assert job["gpu_types"] == ["H800", "A100"]
    assert job["command"] == ["python", "train.py"]
    code, out, _ = _cli(server, "jobs", "--team", "llm")
    assert code == 0 and job["id"] in out and "train-1" in out
    code, out, _ = _cli(server, "jobs", job["id"])
    assert code == 0 and "python train.py" in out
    code, out, _ = _cli(server, "cancel", job["id"])
    assert code == 0 and job["id"] in out
    code, _, err = _cli(server, "logs", job["id"])
    assert code == 0
    deadline = time.monotonic() + 15
    while json.loads(_cli(server, "jobs", job["id"], "--json")[1])["state"] != "cancelled":
        assert time.monotonic() < deadline, "the job never became cancelled"
        time.sleep(0.2)
    code, _, err = _cli(server, "cancel", job["id"])
    assert code == 4 and "error:" in err


def test_errors_from_the_server_become_exit_codes(server: tuple[str, str]) -> None:
    code, _, err = _cli(server, "jobs", "j-does-not-exist")
    assert code == 3 and "error:" in err
    code, _, err = _cli(server, "sites", token="not-a-token")
    assert code == 5
    code, _, err = _cli(
        server, "submit", "--team", "llm", "--gpus", "5000", "--duration", "60", "--", "sleep", "1"
    )
    assert code == 2 and "error:" in err
    code, _, err = _cli(
        server, "submit", "--team", "llm", "--gpus", "1", "--duration", "soon", "--", "sleep", "1"
    )
    assert code == 2 and "not a positive duration" in err
    code, _, err = _cli(server, "submit", "--team", "llm", "--gpus", "1", "--duration", "60")
    assert code == 2 and "hint:" in err


def test_gpu_report_in_three_formats(server: tuple[str, str]) -> None:
    code, out, err = _cli(server, "report", "gpu", "--month", "2026-01", "--format", "json")
    assert code == 0, err
    body = json.loads(out)
    assert body["month"] == "2026-01"
    assert [t["name"] for t in body["teams"]] == ["llm", "vision", "speech"]
    code, out, _ = _cli(server, "report", "gpu", "--month", "2026-01", "--format", "csv")
    assert code == 0
    assert out.splitlines()[0].startswith("group,name,gpu_hours,borrowed_gpu_hours,cost")
    code, out, _ = _cli(server, "report", "gpu", "--month", "2026-01")
    assert code == 0 and "by team" in out and "by site" in out


def test_malformed_month_fails_before_any_request() -> None:
    result = CliRunner().invoke(
        build_app(), ["--server", "http://127.0.0.1:9", "report", "gpu", "--month", "2026-1"]
    )
    assert result.exit_code == 2
    assert "YYYY-MM" in result.stderr


def test_unreachable_server_is_exit_6() -> None:
    result = CliRunner().invoke(
        build_app(), ["--server", f"http://127.0.0.1:{_free_port()}", "sites"]
    )
    assert result.exit_code == 6
    assert "error:" in result.stderr


def test_token_create_mints_a_member_token_that_works(server: tuple[str, str]) -> None:
    code, out, err = _cli(server, "token", "create", "--role", "member", "--team", "vision")
    assert code == 0, err
    assert "shown only once" in err
    member = out.strip()
    code, out, err = _cli(server, "jobs", "--team", "vision", "--json", token=member)
    assert code == 0, err
    assert isinstance(json.loads(out), list)
    code, _, err = _cli(server, "jobs", "--team", "llm", token=member)
    assert code == 5  # another team's jobs: forbidden
    assert "error:" in err


def test_token_create_refuses_a_scope_that_does_not_fit_the_role(server: tuple[str, str]) -> None:
    code, _, err = _cli(server, "token", "create", "--role", "agent", "--team", "vision")
    assert code == 2
    assert "an agent token needs a site" in err
    code, _, err = _cli(server, "token", "create", "--role", "member", "--team", "nobody")
    assert code == 3
    assert "no team 'nobody'" in err


def test_links_routes_checks_and_events(server: tuple[str, str]) -> None:
    code, out, _ = _cli(server, "links", "--json")
    assert code == 0
    assert {link["circuit"]: link["state"] for link in json.loads(out)} == dict.fromkeys(
        ["sha-sin-hk", "sha-sin-tw", "sha-tyo", "sin-tyo"], "unknown"
    )  # no agent probes yet
    code, out, _ = _cli(server, "links")
    assert code == 0 and "sha-sin-hk (68 ms)" in out
    code, out, _ = _cli(server, "routes", "--site", "shanghai")
    assert code == 0 and "sha-tyo → tokyo" in out and "version 1" in out
    code, out, _ = _cli(server, "routes", "--site", "osaka")
    assert code == 3
    code, out, err = _cli(server, "links", "check")
    assert code == 9  # a failed check, not a bug: Shanghai–Tokyo < 40 ms holds only on the primary
    assert "primary-only" in out and "the fabric's RTTs (nothing measured yet)" in out
    assert "error: 1 site pair fails the check: shanghai–tokyo (primary-only)" in err
    code, out, _ = _cli(server, "events", "--kind", "link")
    assert code == 0


def test_a_job_that_does_not_exist_is_named_whatever_its_id(server: tuple[str, str]) -> None:
    for job_id in ("../../etc/passwd", "..", "j-nosuch"):
        code, _, err = _cli(server, "cancel", job_id)
        assert code == 3, err
        assert "Not Found" not in err
        assert job_id in err and "there is no job" in err
    code, _, err = _cli(server, "jobs", "../sites")  # would have been GET /api/v1/sites
    assert code == 3 and "there is no job '../sites'" in err


def test_a_pasted_token_with_a_line_end_works_and_a_broken_one_is_named(
    server: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from onecluster.cli import main

    url, admin = server
    argv = ["--state-dir", str(tmp_path), "--server", url, "sites", "--json"]
    with pytest.raises(SystemExit) as info:
        main(argv, {"ONECLUSTER_TOKEN": admin + "\r\n"})
    assert info.value.code == 0, capsys.readouterr().err
    assert "shanghai" in capsys.readouterr().out
    (tmp_path / "admin.token").write_text(admin + "\r\n")  # a file saved with CRLF
    with pytest.raises(SystemExit) as info:
        main(argv, {})
    assert info.value.code == 0, capsys.readouterr().err
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main(argv, {"ONECLUSTER_TOKEN": admin[:10] + " " + admin[10:]})
    err = capsys.readouterr().err
    assert info.value.code == 5
    assert "the token from $ONECLUSTER_TOKEN is malformed: character 11 is a space" in err
    assert "cannot reach" not in err and admin[10:] not in err
    code, _, err = _cli(server, "sites", token=admin + "\x7f")
    assert code == 5 and "the token from --token is malformed" in err


def test_sites_wait_up_names_the_sites_that_did_not_come_up(server: tuple[str, str]) -> None:
    code, _, err = _cli(server, "sites", "--wait-up", "0.5")
    assert code == 6
    assert "not every site came up within 0.5 s" in err
    assert "shanghai (unknown)" in err


def test_submit_quiet_prints_only_the_job_id(server: tuple[str, str]) -> None:
    code, out, _ = _cli(
        server, "submit", "--quiet", "--team", "llm", "--gpus", "8", "--duration", "60", "--", "x"
    )
    assert code == 0
    assert re.fullmatch(r"j-[0-9a-f]+\n", out), out
    assert _cli(server, "cancel", out.strip())[0] == 0


def test_bad_input_at_the_cli_door_is_refused_by_name(server: tuple[str, str]) -> None:
    """The findings of issue 12 through the CLI: a clear error and its exit code."""
    code, _, err = _cli(server, "jobs", "--team", "nosuch")
    assert code == 3 and "team 'nosuch'" in err and "known teams: llm" in err
    code, _, err = _cli(server, "jobs", "--site", "mars")
    assert code == 3 and "site 'mars'" in err and "tokyo" in err
    submit = ("submit", "--team", "llm", "--gpus", "1")
    code, _, err = _cli(server, *submit, "--duration", "60", "--dataset", "nosuch-ds", "--", "x")
    assert code == 2 and "nosuch-ds" in err and "cc-zh-2026" in err
    code, _, err = _cli(server, *submit, "--duration", "1e308", "--", "sleep", "1")
    assert code == 2 and "error:" in err
    code, _, err = _cli(server, *submit, "--duration", "60", "--", "echo", "x" * 2_000_000)
    assert code == 2 and "at most 16384 characters" in err  # refused before it is sent
    code, _, err = _cli(server, *submit, "--duration", "60", "--name", "a\u202eb", "--", "x")
    assert code == 2 and "U+202E" in err
    code, out, _ = _cli(server, "jobs", "--json")
    assert code == 0 and "nosuch-ds" not in out


def test_a_token_for_an_unknown_team_names_the_known_ones(server: tuple[str, str]) -> None:
    code, _, err = _cli(server, "token", "create", "--role", "member", "--team", "nosuch")
    assert code == 3 and "there is no team 'nosuch'" in err and "known teams: llm" in err


def test_submit_refuses_an_empty_workdir_and_two_outputs(server: tuple[str, str]) -> None:
    base = ["submit", "--team", "llm", "--gpus", "8", "--duration", "60"]
    code, _, err = _cli(server, *base, "--workdir", "", "--", "x")
    assert code == 2 and "--workdir is empty" in err
    code, _, err = _cli(server, *base, "--json", "--quiet", "--", "x")
    assert code == 2 and "give one" in err


def test_report_gpu_compare_shows_each_team_before_and_after(server: tuple[str, str]) -> None:
    code, out, err = _cli(
        server, "report", "gpu", "--month", "2026-01", "--compare", "separate", "--format", "json"
    )
    assert code == 0, err
    body = json.loads(out)
    assert (body["after"], body["before"], body["jobs"]) == ("unified", "separate", 0)
    code, out, _ = _cli(server, "report", "gpu", "--month", "2026-01", "--compare", "separate")
    assert code == 0 and "replayed under both" in out
    code, _, err = _cli(server, "report", "gpu", "--month", "2026-01", "--compare", "unified")
    assert code == 2 and "separate or fifo" in err

"""``export request|approve|revoke|approvals|start|list|show|register`` and ``token create
--holder`` against a real server; the de-identification's agent is played by syncs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from onecluster.cli import build_app
from onecluster.client import Client
from onecluster.schema import AgentSync, DataReport, ReplicaReport, ScanReport, TokenCreate

pytestmark = pytest.mark.integration

ROOT = "2e" * 32


def _cli(url: str, token: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        build_app(), ["--server", url, "--token", token, *args], env={"COLUMNS": "200"}
    )
    return result.exit_code, result.stdout, result.stderr


def _token(url: str, admin: str, *args: str) -> str:
    code, out, err = _cli(url, admin, "token", "create", *args)
    assert code == 0, err
    return out.strip()


def _scanned_at_shanghai(url: str, admin: str, name: str) -> None:
    code, out, err = _cli(url, admin, "dataset", "add", name, "--site", "shanghai", "--path",
                          f"/d/{name}", "--no-wait", "--json")  # fmt: skip
    assert code == 0, err
    scan = json.loads(out)
    with Client(url, admin) as client:
        token = client.create_token(TokenCreate(role="agent", site="shanghai")).token
    replica = ReplicaReport(dataset=name, root=ROOT, state="complete", bytes_present=10, path="/d")
    done = ScanReport(id=scan["id"], state="done", bytes_done=10, root=ROOT, files=1)
    data = DataReport(port=7400, address="127.0.0.1", scans=[done], replicas=[replica])
    with Client(url, token) as agent:
        agent.agent_sync("shanghai", AgentSync(agent_id="fake-shanghai", data=data))


def test_an_approval_is_asked_for_approved_by_someone_else_and_an_export_started(
    server: tuple[str, str], tmp_path: Path
) -> None:
    url, admin = server
    _scanned_at_shanghai(url, admin, "crm")
    alice = _token(url, admin, "--role", "member", "--team", "llm", "--holder", "alice")
    alice_too = _token(url, admin, "--role", "compliance", "--holder", "alice")
    bob = _token(url, admin, "--role", "compliance", "--holder", "bob")
    profile = tmp_path / "profile.yaml"
    profile.write_text("version: 1\nfields:\n  phone: {action: mask}\n")

    code, out, err = _cli(url, alice, "export", "request", "crm", "--to", "singapore",
                          "--purpose", "triage model", "--route", "standard_contract",
                          "--route-ref", "SC-7", "--personal", "--categories", "general-pi",
                          "--profile", str(profile), "--valid-until", "2099-12-31",
                          "--max-bytes", "5GB", "--json")  # fmt: skip
    assert code == 0, err
    asked = json.loads(out)
    assert (asked["state"], asked["max_bytes"], asked["destinations"]) == (
        "requested",
        5 * 10**9,
        ["singapore"],
    )
    assert asked["requester"].startswith("alice (member of team llm")

    code, _, err = _cli(url, alice_too, "export", "approve", asked["id"])
    assert code == 5 and "nobody approves their own request" in err
    code, _, err = _cli(url, alice, "export", "approve", asked["id"])
    assert code == 5 and "needs compliance" in err
    code, out, err = _cli(url, bob, "export", "approve", asked["id"])
    assert code == 0 and "approved" in out and "approved by bob" in out, err

    code, out, err = _cli(url, alice, "push", "crm", "--to", "singapore", "--no-wait")
    assert code == 5 and "controls exports" in err
    code, out, err = _cli(url, alice, "export", "start", "crm", "--to", "singapore",
                          "--approval", asked["id"], "--no-wait", "--json")  # fmt: skip
    assert code == 0, err
    export = json.loads(out)
    assert (export["state"], export["src"], export["export_dataset"]) == (
        "preparing",
        "shanghai",
        "crm-deid",
    )
    code, out, _ = _cli(url, alice, "export", "list")
    assert code == 0 and export["id"] in out
    code, out, _ = _cli(url, alice, "export", "show", export["id"])
    # (Not a check on "de" in the first line: export ids are time-ordered hex, and since
    # 2026-12-05 every new id holds "de".)
    assert code == 0 and out.startswith(f"export {export['id']}") and "preparing" in out

    code, out, err = _cli(url, bob, "export", "revoke", asked["id"], "--reason", "withdrawn")
    assert code == 0 and "revoked (withdrawn)" in out, err
    code, out, err = _cli(url, alice, "export", "approvals")
    assert code == 0 and asked["id"] in out and "revoked" in out, err


def test_the_month_s_register_is_written_and_verifies(
    server: tuple[str, str], tmp_path: Path
) -> None:
    url, admin = server
    _scanned_at_shanghai(url, admin, "logs")
    auditor = _token(url, admin, "--role", "auditor", "--holder", "carol")
    code, _, err = _cli(url, admin, "push", "logs", "--to", "tokyo", "--no-wait")
    assert code == 5, err  # refused, and the refusal is in the register
    from datetime import UTC, datetime

    month = datetime.now(UTC).strftime("%Y-%m")
    out_dir = tmp_path / "bundle"
    code, out, err = _cli(url, auditor, "export", "register", "--month", month, "--out",
                          str(out_dir))  # fmt: skip
    assert code == 0 and "export verify" in out, err
    assert {"exports.csv", "exports.json", "register.html"} <= {p.name for p in out_dir.iterdir()}
    code, out, err = _cli(url, auditor, "export", "verify", str(out_dir))
    assert code == 0, err
    code, _, err = _cli(url, auditor, "export", "register", "--month", month, "--out",
                        str(out_dir))  # fmt: skip
    assert code == 4 and "not an empty directory" in err
    code, _, err = _cli(url, auditor, "export", "register", "--month", "2026-13", "--out",
                        str(tmp_path / "x"))  # fmt: skip
    assert code == 2, err

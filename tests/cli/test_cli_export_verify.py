"""`onecluster export verify`: a register or a bundle checks out (exit 0), tampering is
named (exit 10), a bad key file or a directory that is neither is refused (2, 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import Result
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from typer.testing import CliRunner

from onecluster.cli import build_app
from onecluster.cli._config import Environment
from onecluster.register import Register, write_bundle


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(build_app(), args, obj=Environment())


@pytest.fixture
def register(tmp_path: Path) -> Path:
    directory = tmp_path / "register"
    with Register.open(directory, group_wait_s=0) as reg:
        for n in range(3):
            reg.append({"type": "intent", "export": f"x{n}", "dataset": "notes"})
    return directory


def test_a_register_verifies(register: Path) -> None:
    result = invoke(["export", "verify", str(register)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("verified: register of 3 entries")
    assert "key fingerprint:" in result.stdout


def test_json_with_a_pinned_key(register: Path) -> None:
    result = invoke(
        ["export", "verify", str(register), "--public-key", str(register / "public.key"), "--json"]
    )
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["kind"] == "register" and body["size"] == 3 and body["entries_checked"] == 3


def test_a_bundle_verifies(register: Path, tmp_path: Path) -> None:
    with Register.open(register) as reg:
        month = reg.entries()[0]["at"][:7]
        write_bundle(reg, month, tmp_path / "bundle")
    result = invoke(["export", "verify", str(tmp_path / "bundle"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["month"] == month


def test_tampering_exits_10_naming_the_entry(register: Path) -> None:
    path = register / "entries.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"export":"x1"', b'"export":"x9"'))
    result = invoke(["export", "verify", str(register)])
    assert result.exit_code == 10
    assert "error: entry 1 (line 2 of entries.jsonl): its hash" in result.stderr


def test_another_pinned_key_exits_10(register: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.pub"
    other.write_text(Ed25519PrivateKey.generate().public_key().public_bytes_raw().hex())
    result = invoke(["export", "verify", str(register), "--public-key", str(other)])
    assert result.exit_code == 10
    assert "bad signature" in result.stderr


def test_a_key_file_that_holds_no_key_exits_2(register: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.pub"
    bad.write_text("not a key")
    result = invoke(["export", "verify", str(register), "--public-key", str(bad)])
    assert result.exit_code == 2
    assert "not an Ed25519 public key" in result.stderr


def test_a_directory_that_is_neither_exits_3(tmp_path: Path) -> None:
    result = invoke(["export", "verify", str(tmp_path)])
    assert result.exit_code == 3
    assert "neither an export register" in result.stderr

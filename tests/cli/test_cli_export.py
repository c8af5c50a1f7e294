"""`onecluster export deid`: the key (file, environment, none), the report, the exit codes."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from onecluster.cli import build_app, main
from onecluster.cli._config import Environment

MOBILE = "13812345678"


def _input(tmp_path: Path) -> Path:
    path = tmp_path / "in.csv"
    path.write_text(f"id,phone,note\n1,{MOBILE},身份证11010519491231002X\n2,,none\n")
    return path


def _key(tmp_path: Path, text: str = "a" * 32 + "\n", mode: int = 0o600) -> Path:
    path = tmp_path / "deid.key"
    path.write_text(text)
    path.chmod(mode)
    return path


def invoke(args: list[str], env: Environment | None = None) -> Result:
    return CliRunner().invoke(build_app(), args, obj=env or Environment())


def test_json_report_with_a_key_file(tmp_path: Path) -> None:
    source, key = _input(tmp_path), _key(tmp_path)
    result = invoke(
        ["export", "deid", "--input", str(source), "--output", str(tmp_path / "out.csv"),
         "--key-file", str(key), "--json"]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["records"] == 2 and body["individuals"] == 1
    assert body["detectors"] == {
        "cn_mobile": {"found": 1, "distinct": 1},
        "cn_resident_id": {"found": 1, "distinct": 1},
    }
    assert body["fields"]["phone"] == {"action": "scan", "changed": 1, "found": 1, "unparseable": 0}
    out = (tmp_path / "out.csv").read_bytes()
    assert MOBILE.encode() not in out
    assert body["sha256"] == hashlib.sha256(out).hexdigest()
    assert "a" * 32 not in result.stdout


def test_the_key_from_the_environment_and_the_table_output(tmp_path: Path) -> None:
    source = _input(tmp_path)
    env = Environment.from_mapping({"ONECLUSTER_DEID_KEY": "b" * 32})
    result = invoke(
        ["export", "deid", "--input", str(source), "--output", str(tmp_path / "o.csv")], env
    )
    assert result.exit_code == 0, result.output
    assert "cn_mobile" in result.stdout and "individuals:  1" in result.stdout
    # Another key, other tokens.
    result = invoke(
        ["export", "deid", "--input", str(source), "--output", str(tmp_path / "p.csv"),
         "--key-file", str(_key(tmp_path))], env,
    )  # fmt: skip
    assert (tmp_path / "o.csv").read_bytes() != (tmp_path / "p.csv").read_bytes()


def test_no_key_is_refused_saying_why(tmp_path: Path) -> None:
    source = _input(tmp_path)
    result = invoke(["export", "deid", "--input", str(source), "--output", str(tmp_path / "o.csv")])
    assert result.exit_code == 2
    assert "no de-identification key" in result.stderr
    assert "brute force" in result.stderr
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize(
    ("key", "mode", "message"),
    [("short\n", 0o600, "too short"), ("\n  \n", 0o600, "is empty")],
)
def test_bad_keys_are_refused(tmp_path: Path, key: str, mode: int, message: str) -> None:
    args = ["export", "deid", "--input", str(_input(tmp_path)), "--output",
            str(tmp_path / "o.csv"), "--key-file", str(_key(tmp_path, key, mode))]  # fmt: skip
    result = invoke(args)
    assert result.exit_code == 2 and message in result.stderr


def test_a_key_file_others_can_read_is_warned_about(tmp_path: Path) -> None:
    args = ["export", "deid", "--input", str(_input(tmp_path)), "--output",
            str(tmp_path / "o.csv"), "--key-file", str(_key(tmp_path, mode=0o644))]  # fmt: skip
    result = invoke(args)
    assert result.exit_code == 0 and "can be read by others" in result.stderr


def test_refusals_map_to_exit_codes(tmp_path: Path) -> None:
    key = str(_key(tmp_path))
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2,3\n")
    profile = tmp_path / "p.yaml"
    profile.write_text("version: 1\nfields: {mobile: drop}\n")
    cases = [
        (["--input", str(bad), "--output", str(tmp_path / "o.csv")], 2, "line 2"),
        (["--input", str(_input(tmp_path)), "--output", str(tmp_path / "o.csv"),
          "--profile", str(profile)], 2, "'mobile', which the header"),
        (["--input", str(tmp_path / "none.csv"), "--output", str(tmp_path / "o.csv")], 3,
         "does not exist"),
    ]  # fmt: skip
    for args, code, message in cases:
        result = invoke(["export", "deid", *args, "--key-file", key])
        assert result.exit_code == code, result.output
        assert message in result.stderr
    assert not (tmp_path / "o.csv").exists()


def test_main_reads_the_key_from_the_environment_it_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _input(tmp_path)
    with pytest.raises(SystemExit) as done:
        main(
            [
                "export",
                "deid",
                "--input",
                str(source),
                "--output",
                str(tmp_path / "o.csv"),
                "--json",
            ],
            environ={"ONECLUSTER_DEID_KEY": "c" * 32},
        )
    assert done.value.code == 0
    assert json.loads(capsys.readouterr().out)["records"] == 2
    assert "ONECLUSTER_DEID_KEY" not in os.environ

"""Errors become `error:`/`hint:` lines on stderr and the documented exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from onecluster.cli import build_app
from onecluster.errors import (
    AuthError,
    BackendError,
    ConflictError,
    NotFoundError,
    PlatformError,
    UnavailableError,
    ValidationError,
)


def _app_raising(exc: BaseException) -> typer.Typer:
    app = build_app()

    @app.command("boom")
    def boom() -> None:
        raise exc

    return app


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (ValidationError("the month is wrong", hint="use YYYY-MM"), 2),
        (NotFoundError("job j-1 does not exist"), 3),
        (ConflictError("job j-1 has already finished"), 4),
        (AuthError("no token was given"), 5),
        (UnavailableError("the server at http://x cannot be reached"), 6),
        (BackendError("the agent died"), 7),
        (PlatformError("something went wrong"), 1),
    ],
)
def test_platform_errors_map_to_their_exit_codes(exc: PlatformError, code: int) -> None:
    result = CliRunner().invoke(_app_raising(exc), ["boom"])
    assert result.exit_code == code
    assert result.stdout == ""
    assert f"error: {exc.message}" in result.stderr
    assert ("hint: use YYYY-MM" in result.stderr) == (exc.hint is not None)
    assert "Traceback" not in result.stderr


def test_unexpected_error_is_exit_1_without_traceback_unless_debug() -> None:
    app = _app_raising(RuntimeError("kaput"))
    plain = CliRunner().invoke(app, ["boom"])
    assert plain.exit_code == 1
    assert "error: unexpected RuntimeError: kaput" in plain.stderr
    assert "--debug" in plain.stderr
    assert "Traceback" not in plain.stderr
    debug = CliRunner().invoke(app, ["--debug", "boom"])
    assert debug.exit_code == 1
    assert "Traceback" in debug.stderr
    assert "kaput" in debug.stderr


def test_ctrl_c_exits_130() -> None:
    result = CliRunner().invoke(_app_raising(KeyboardInterrupt()), ["boom"])
    assert result.exit_code == 130


def test_bad_flags_are_usage_errors_with_exit_2() -> None:
    result = CliRunner().invoke(build_app(), ["jobs", "--limit", "zero"])
    assert result.exit_code == 2


def test_bad_server_url_is_reported_before_any_command_runs() -> None:
    result = CliRunner().invoke(build_app(), ["--server", "localhost:1", "sites"])
    assert result.exit_code == 2
    assert "must start with http" in result.stderr


def test_help_lists_every_command_group() -> None:
    result = CliRunner().invoke(build_app(), ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for command in (
        "up",
        "server",
        "agent",
        "submit",
        "jobs",
        "cancel",
        "logs",
        "sites",
        "simulate",
        "report",
    ):
        assert command in result.stdout


def test_main_reads_the_server_from_the_given_environment(
    capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    from onecluster.cli import main

    with pytest.raises(SystemExit) as info:
        main(["--state-dir", str(tmp_path), "sites"], {"ONECLUSTER_SERVER": "http://127.0.0.1:9"})
    assert info.value.code == 6
    assert "127.0.0.1:9" in capsys.readouterr().err


def test_option_values_that_make_an_invalid_body_are_exit_2() -> None:
    from typer.testing import CliRunner

    from onecluster.cli import build_app

    args = ["--server", "http://127.0.0.1:9", "submit", "--team", "llm", "--gpus", "1"]
    args += ["--duration", "5", "--dataset-gb", "1e400", "--", "true"]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 2
    assert "invalid value for dataset_gb" in result.stderr
    assert "Traceback" not in result.stderr


def test_server_refuses_a_database_in_a_folder_that_does_not_exist(tmp_path: Path) -> None:
    fabric = Path(__file__).resolve().parents[2] / "examples" / "fabrics" / "three-site.yaml"
    db = tmp_path / "nonexistent" / "dir" / "x.db"
    args = ["--state-dir", str(tmp_path / "state"), "server", "--fabric", str(fabric)]
    result = CliRunner().invoke(build_app(), [*args, "--port", "0", "--db", f"sqlite:///{db}"])
    assert result.exit_code == 2
    assert f"{db.parent} does not exist" in result.stderr and "hint:" in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing created, not even the state folder

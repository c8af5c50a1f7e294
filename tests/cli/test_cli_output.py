"""What every command prints around its answer: flags in ``--help`` and a reader that leaves."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from onecluster.cli import build_app

ROOT = Path(__file__).resolve().parents[2]
THREE = str(ROOT / "examples" / "fabrics" / "three-site.yaml")


def _command_paths() -> Iterator[list[str]]:
    def walk(command: object, path: list[str]) -> Iterator[list[str]]:
        yield path
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, [*path, name])

    yield from walk(typer.main.get_command(build_app()), [])


@pytest.mark.parametrize("path", list(_command_paths()), ids=lambda p: " ".join(p) or "root")
def test_on_off_flags_show_without_a_value_in_help(path: list[str]) -> None:
    result = CliRunner().invoke(build_app(), [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "--help" in result.stdout
    assert "<bool>" not in result.stdout  # e.g. `--preemptible <bool>` read as taking a value


def test_a_flag_still_takes_no_value() -> None:
    help_text = CliRunner().invoke(build_app(), ["submit", "--help"], env={"COLUMNS": "200"})
    line = next(x for x in help_text.stdout.splitlines() if "--preemptible" in x)
    assert line.split("--preemptible")[1].split()[0] == "May"  # its help, no type between
    result = CliRunner().invoke(build_app(), ["links", "check", "--json", "true"])
    assert result.exit_code == 2  # `true` is not a value of --json but an unexpected argument


@pytest.mark.parametrize(
    "args",
    [
        ["agent", "--help"],
        ["--help"],
        ["links", "check", "--fabric", THREE],  # a Rich table
        ["links", "check", "--fabric", THREE, "--json"],  # plain echo
    ],
    ids=["command help", "root help", "table", "json"],
)
def test_a_reader_that_went_away_ends_the_command_quietly(args: list[str]) -> None:
    """``onecluster agent --help | head -1``: the shell's 141 (SIGPIPE), no traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written
    try:
        done = subprocess.run(
            [sys.executable, "-m", "onecluster.cli", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "COLUMNS": "100"},
        )
    finally:
        os.close(write_end)
    assert done.returncode == 141
    assert done.stderr == ""

"""The Makefile's first run and its Ctrl-C, run for real against a copy of the Makefile.

The install test stands a stub in for the interpreter (its "venv" has a pip that only records
how it was called), so it needs neither the network nor a minute.  The Ctrl-C test runs the
real `onecluster up` through `make run` and interrupts the whole process group, as a terminal
does: make gets the SIGINT too.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")

# Stands in for `python3 -m venv DIR`: a venv whose pip records its arguments.
STUB_PYTHON = """#!/bin/sh
echo "stub: $*"
mkdir -p "$3/bin"
printf '#!/bin/sh\\necho "stub: pip $*"\\necho "$*" >> "%s/pip-calls"\\n' "$3" > "$3/bin/pip"
chmod +x "$3/bin/pip"
"""


def _copy(tmp_path: Path) -> Path:
    work = tmp_path / "repo"
    work.mkdir()
    shutil.copy(REPO / "Makefile", work)
    shutil.copy(REPO / "pyproject.toml", work)
    return work


def _make_install(work: Path, python: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "install", f"PYTHON={python}"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_first_install_says_what_it_does_at_once_and_pip_shows_its_progress(
    tmp_path: Path,
) -> None:
    work = _copy(tmp_path)
    stub = tmp_path / "python-stub"
    stub.write_text(STUB_PYTHON)
    stub.chmod(0o755)
    done = _make_install(work, stub)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    # the first line says what is happening and how long it takes, before any step runs
    assert "installing onecluster" in lines[0] and "about two minutes" in lines[0], lines
    assert lines.index("stub: -m venv .venv") > 0
    calls = (work / ".venv" / "pip-calls").read_text().splitlines()
    assert len(calls) == 2 and calls[-1].endswith("-e .[dev,training]"), calls
    for call in calls:  # pip is not silenced: it prints each package it fetches and installs
        assert not {"-q", "--quiet"} & set(call.split()), call
    assert "is ready" in lines[-1]
    # once installed, nothing is done again
    again = _make_install(work, stub)
    assert again.returncode == 0
    assert "stub:" not in again.stdout and "installing" not in again.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.mark.slow
@pytest.mark.integration
def test_ctrl_c_of_make_run_stops_everything_and_make_reports_no_error(tmp_path: Path) -> None:
    onecluster = Path(sys.executable).parent / "onecluster"
    if not onecluster.exists():
        pytest.skip(f"needs the onecluster entry point next to {sys.executable}")
    work = _copy(tmp_path)
    (work / "examples").symlink_to(REPO / "examples")
    (work / ".venv" / "bin").mkdir(parents=True)
    (work / ".venv" / "bin" / "onecluster").symlink_to(onecluster)
    (work / ".venv" / ".installed").touch()  # newer than pyproject.toml: nothing to install
    up_args = f"UP_ARGS=--generator --duration 2 --jobs 3 --port {_free_port()}"
    make = subprocess.Popen(
        ["make", "--no-print-directory", "run", up_args],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        env={**os.environ, "COLUMNS": "120"},
    )
    lines: list[str] = []
    try:
        assert make.stdout is not None
        deadline = time.monotonic() + 150
        for line in make.stdout:
            lines.append(line)
            if "press Ctrl-C" in line:
                break
            assert time.monotonic() < deadline, "".join(lines)
        os.killpg(make.pid, signal.SIGINT)  # Ctrl-C: make and `onecluster up` both get it
        rest, _ = make.communicate(timeout=60)
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait()
    out = "".join(lines) + rest
    assert "stopped 4 processes" in rest, out
    # `onecluster up` exited 0, so make reports nothing (it said "Error 130" before); make
    # itself then ends by the SIGINT it got, silently, as make always does
    assert "make: ***" not in out and not re.search(r"Error \d+", out), out
    assert make.returncode == -signal.SIGINT
    leftovers = [
        p.name for p in Path("/proc").iterdir() if p.name.isdigit() and str(work) in _cmdline(p)
    ]
    assert leftovers == []


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""

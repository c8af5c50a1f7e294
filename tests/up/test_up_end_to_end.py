"""`onecluster up` end to end: real server, agents and jobs; nothing left behind."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _processes_using(state: Path) -> list[int]:
    """PIDs whose command line or working directory mentions the state directory."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = str((entry / "cwd").readlink())
        except OSError:
            continue
        if str(state) in cmdline or cwd.startswith(str(state)):
            found.append(int(entry.name))
    return found


def _up(state: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "onecluster.cli",
        "--state-dir",
        str(state),
        "up",
        "--port",
        str(_free_port()),
        "--generator",
        "--jobs",
        "6",
        *extra,
    ]


def test_up_replays_jobs_to_completion_and_stops_everything(tmp_path: Path) -> None:
    state = tmp_path / "state"
    done = subprocess.run(
        _up(state, "--duration", "15", "--no-wait"),
        check=False,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "generator fitted to the Alibaba GPU trace" in out
    replay = re.search(r"replay: (\d+) jobs submitted, (\d+) refused, (\d+) completed", out)
    assert replay is not None, out
    assert int(replay.group(1)) == 6
    assert int(replay.group(3)) >= 1
    assert "mean queue wait" in out and "/docs" in out and "NOC dashboard: http" in out
    # stdout is a pipe, not a terminal: plain progress lines came during the replay
    progress = re.findall(r"^(\d+)s/15s  submitted \d+/6", out, re.MULTILINE)
    assert len(progress) >= 3 and progress[-1] == "15", out
    stopped = re.search(r"stopped 4 processes: (.*)", out)
    assert stopped is not None, out
    assert stopped.group(1).startswith("agent-")
    assert stopped.group(1).rstrip().endswith(")") and "server (pid" in stopped.group(1)
    for pid in map(int, re.findall(r"pid (\d+)", stopped.group(1))):
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    assert _processes_using(state) == []
    assert (state / "logs" / "server.log").is_file()
    assert not (state / "server.url").exists()


def _serve_then_signal(state: Path, sig: signal.Signals, *extra: str) -> tuple[int, str]:
    """Run ``up`` in a process group of its own, wait for ``ready`` in its output, send
    ``sig`` to the whole group (as a terminal's Ctrl-C does); its exit status and output."""
    *args, ready = extra
    proc = subprocess.Popen(
        _up(state, *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={**os.environ, "COLUMNS": "120"},
    )
    try:
        assert proc.stdout is not None
        lines = []
        deadline = time.monotonic() + 150
        for line in proc.stdout:
            lines.append(line)
            if ready in line:
                break
            assert time.monotonic() < deadline, "".join(lines)
        os.killpg(proc.pid, sig)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, "".join(lines) + rest


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_asked_for_while_serving_stops_every_process_and_exits_0(
    tmp_path: Path, sig: signal.Signals
) -> None:
    state = tmp_path / "state"
    code, out = _serve_then_signal(state, sig, "--duration", "3", "--jobs", "3", "press Ctrl-C")
    assert code == 0, out
    assert "stopping every process, as asked" in out
    assert "stopped 4 processes" in out
    assert "interrupted" not in out
    assert _processes_using(state) == []
    assert not (state / "server.url").exists()


def test_a_finite_run_cut_short_stops_every_process_and_exits_130(tmp_path: Path) -> None:
    state = tmp_path / "state"
    code, out = _serve_then_signal(
        state, signal.SIGINT, "--duration", "60", "--jobs", "3", "--no-wait", "replaying for"
    )
    assert code == 130, out
    assert "stopped 4 processes" in out and "interrupted" in out
    assert "summary" not in out
    assert _processes_using(state) == []

"""``onecluster events`` resumes from a cursor: ``--after ID`` and ``--cursor-file PATH``, once
or following, against a real server (``conftest.py``'s; no agents, so the only ``submitted``
events are this module's)."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest
from typer.testing import CliRunner

from onecluster.cli import build_app
from onecluster.client import Client
from onecluster.schema import JobSubmit

pytestmark = pytest.mark.integration

_WAIT_S = 30.0


def _cli(server: tuple[str, str], *args: str) -> tuple[int, str, str]:
    url, admin = server
    result = CliRunner().invoke(
        build_app(), ["--server", url, "--token", admin, *args], env={"COLUMNS": "200"}
    )
    return result.exit_code, result.stdout, result.stderr


def _submit(server: tuple[str, str], n: int) -> list[str]:
    url, admin = server
    body = JobSubmit(team="llm", gpus=8, duration_s=3600.0, gpu_types=["H800"], command=["true"])
    with Client(url, admin) as client:
        return [client.submit(body).id for _ in range(n)]


def _submitted(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines()]


def _all_submitted(server: tuple[str, str]) -> list[dict[str, object]]:
    code, out, err = _cli(
        server, "events", "--json", "--kind", "submitted", "--after", "0", "--limit", "1000"
    )
    assert code == 0, err
    return _submitted(out)


def test_a_cursor_file_resumes_where_the_last_run_stopped(
    server: tuple[str, str], tmp_path: Path
) -> None:
    cursor = tmp_path / "cursor"
    before = len(_all_submitted(server))
    first_jobs = _submit(server, 5)
    args = ("events", "--json", "--kind", "submitted", "--cursor-file", str(cursor))
    code, out, err = _cli(server, *args, "--after", str(0), "--limit", str(before + 3))
    assert code == 0, err
    first = _submitted(out)[before:]
    assert [e["job_id"] for e in first] == first_jobs[:3]
    assert cursor.read_text() == f"{first[-1]['id']}\n"

    later_jobs = _submit(server, 2)
    code, out, err = _cli(server, *args, "--after", "0")  # the file wins over --after
    assert code == 0, err
    rest = _submitted(out)
    assert [e["job_id"] for e in rest] == first_jobs[3:] + later_jobs
    assert cursor.read_text() == f"{rest[-1]['id']}\n"
    assert [e["id"] for e in first + rest] == [e["id"] for e in _all_submitted(server)[before:]]

    code, out, err = _cli(server, *args)
    assert (code, out) == (0, "")
    assert cursor.read_text() == f"{rest[-1]['id']}\n"


def test_after_prints_the_events_after_an_id_only(server: tuple[str, str]) -> None:
    jobs = _submit(server, 3)
    mine = [e for e in _all_submitted(server) if e["job_id"] in jobs]
    code, out, err = _cli(
        server, "events", "--json", "--kind", "submitted", "--after", str(mine[0]["id"])
    )
    assert code == 0, err
    assert [e["job_id"] for e in _submitted(out)] == jobs[1:]
    code, out, err = _cli(server, "events", "--kind", "submitted", "--after", str(mine[1]["id"]))
    assert code == 0, err
    assert f"job {jobs[2]} submitted by team llm" in out
    assert jobs[1] not in out


def _pump(source: IO[str], into: queue.Queue[str]) -> None:
    for line in source:
        into.put(line)


def _lines(stream: queue.Queue[str], n: int) -> list[str]:
    return [stream.get(timeout=_WAIT_S) for _ in range(n)]


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + _WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_follower_stopped_and_restarted_with_its_cursor_file_misses_nothing(
    server: tuple[str, str], tmp_path: Path
) -> None:
    url, admin = server
    cursor = tmp_path / "noc" / "cursor"
    cursor.parent.mkdir()
    before = _all_submitted(server)
    start = str(before[-1]["id"]) if before else "0"
    command = [sys.executable, "-m", "onecluster.cli", "--server", url, "--token", admin]
    command += ["events", "--follow", "--json", "--kind", "submitted", "--interval", "0.1"]
    command += ["--cursor-file", str(cursor), "--after", start]
    follower = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    assert follower.stdout is not None
    reader = threading.Thread(target=_pump, args=(follower.stdout, lines))
    reader.start()
    try:
        seen_jobs = _submit(server, 3)
        seen = [json.loads(line) for line in _lines(lines, 3)]
        assert [e["job_id"] for e in seen] == seen_jobs
        more = _submit(server, 2)
        seen += [json.loads(line) for line in _lines(lines, 2)]
        assert [e["job_id"] for e in seen[3:]] == more
        last = seen[-1]["id"]
        _wait_for(lambda: cursor.exists() and cursor.read_text() == f"{last}\n", "the cursor")
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=_WAIT_S)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
        reader.join()
    assert follower.returncode == 130
    assert f"stopped after event {last}; resume with --after {last}" in err

    while_down = _submit(server, 4)
    code, out, err = _cli(server, "events", "--json", "--cursor-file", str(cursor))
    assert code == 0, err
    resumed = _submitted(out)
    assert [e["job_id"] for e in resumed] == while_down
    assert [e["id"] for e in seen + resumed] == [
        e["id"] for e in _all_submitted(server)[len(before) :]
    ]


def test_a_cursor_file_that_holds_no_event_id_is_refused(
    server: tuple[str, str], tmp_path: Path
) -> None:
    broken = tmp_path / "cursor"
    broken.write_text("twelve\n")
    code, out, err = _cli(server, "events", "--cursor-file", str(broken))
    assert (code, out) == (2, "")
    assert f"the cursor file {broken} holds 'twelve', not an event id" in err
    nowhere = tmp_path / "missing" / "cursor"
    code, out, err = _cli(server, "events", "--cursor-file", str(nowhere))
    assert (code, out) == (2, "")
    assert f"{tmp_path / 'missing'} is not a folder" in err

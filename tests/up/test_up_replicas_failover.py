"""`up --replicas 2` on PostgreSQL, end to end: the leading replica is SIGKILLed mid-run, `up`
says so and who leads next, and the run completes with every job done.

Real processes on loopback: two `onecluster server` replicas on a fresh database of the
cluster ``ONECLUSTER_TEST_PG_URL`` names, three agents, the jobs and `up` itself.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from onecluster.launch import free_port

pytestmark = [
    pytest.mark.slow,
    pytest.mark.integration,
    pytest.mark.postgres,
    pytest.mark.timeout(300),
]

DURATION_S = 30
KILL_AFTER_S = 5  # seconds of replay: jobs are arriving and running


def test_up_rides_out_the_loss_of_the_leading_replica(tmp_path: Path, pg_database: str) -> None:
    state = tmp_path / "state"
    argv = [sys.executable, "-m", "onecluster.cli", "--state-dir", str(state), "up"]
    argv += ["--db", pg_database, "--replicas", "2", "--port", str(free_port("127.0.0.1"))]
    argv += ["--generator", "--jobs", "6", "--duration", str(DURATION_S), "--no-wait"]
    lines: list[str] = []
    pids: dict[str, int] = {}
    leader: str | None = None
    killed: tuple[str, int] | None = None  # the replica that led when killed, and its pid
    cli: subprocess.CompletedProcess[str] | None = None
    with subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={**os.environ, "COLUMNS": "200"},
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if started := re.match(r"started (server-\d) \(pid (\d+)\)", line):
                pids[started.group(1)] = int(started.group(2))
            if leads := re.match(r"(server-\d) leads at ", line):
                leader = leads.group(1)
            progress = re.match(rf"(\d+)s/{DURATION_S}s ", line)
            if killed is None and progress and int(progress.group(1)) >= KILL_AFTER_S:
                assert leader is not None, "".join(lines)
                killed = (leader, pids[leader])
                os.kill(killed[1], signal.SIGKILL)
                cli = _cli_in_another_shell(state, "jobs", "--json")
        # `up` ends on its own once the replay is over (--no-wait); Popen's exit waits for it
    out = "".join(lines)
    assert proc.returncode == 0, out
    assert killed is not None and killed[0] == "server-1", out  # the first leads till it dies
    # the CLI of another shell finds both replicas while `up` runs (removed at the end)
    assert "the CLI finds them in" in out and not (state / "server.url").exists()
    assert cli is not None and cli.returncode == 0, cli
    assert json.loads(cli.stdout), cli  # the jobs, from the replica left
    lost = f"lost replica server-1 (pid {killed[1]}, exit status 137); 1 of 2 replicas serve on"
    assert lost in out
    assert re.search(r"server-2 leads at http://127\.0\.0\.1:\d+ \(term 2, after server-1\)", out)
    replay = re.search(
        r"replay: (\d+) jobs submitted, 0 refused, (\d+) completed"
        r"(?:, (\d+) sent without an answer)?",
        out,
    )
    assert replay is not None, out
    submitted, completed, unanswered = (int(n or 0) for n in replay.groups())
    # a POST under way when the replica died may or may not have made its job: not re-sent
    assert submitted + unanswered == 6 and submitted <= completed <= 6, out
    for count in ("failed", "running", "pending"):  # every job that exists is done
        assert re.search(rf"jobs {count} +0 ", out), out
    stopped = re.search(r"stopped 4 processes: (.*)", out)  # the lost one was not among them
    assert stopped is not None and "server-2 (pid" in stopped.group(1), out
    assert "server-1" not in stopped.group(1)
    for pid in map(int, re.findall(r"pid (\d+)", stopped.group(1))):
        assert _gone(pid)


def _cli_in_another_shell(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with nothing but ``up``'s state folder: it finds the servers and token there."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("ONECLUSTER_SERVER", "ONECLUSTER_TOKEN")
    }
    return subprocess.run(
        [sys.executable, "-m", "onecluster.cli", "--state-dir", str(state), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def _gone(pid: int) -> bool:
    try:
        return "Z" in Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1]
    except OSError:
        return True

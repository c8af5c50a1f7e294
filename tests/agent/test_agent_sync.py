"""The agent's sync loop against a fake control plane, with real processes on a LocalBackend.

The loop runs in a thread on the real clock with a 50 ms heartbeat; the tests wait (bounded)
for what the fake receives.  The backend belongs to the agent's thread while it runs, so the
tests observe processes only through files they write and through the fake's records.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from onecluster.agent import Agent
from onecluster.backends import LocalBackend
from onecluster.process import alive

TOKEN = "agent-token-sha"
SITE = "sha"
IDLE = "echo ready; while :; do sleep 0.02; done"

Order = Callable[..., dict[str, Any]]


class Loop:
    """An Agent running in a thread; ``stop()`` shuts it down and joins."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.event = threading.Event()
        self.thread = threading.Thread(target=agent.run, args=(self.event,), daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.event.set()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()


@pytest.fixture
def start_agent(tmp_path: Path, control_plane: Any) -> Iterator[Callable[..., Loop]]:
    loops: list[Loop] = []

    def start(pools: dict[str, int] | None = None, **options: Any) -> Loop:
        backend = LocalBackend(SITE, pools or {"H100": 8}, tmp_path / "agent")
        options = {
            "heartbeat_interval_s": 0.05,
            "max_backoff_s": 0.2,
            "stop_grace_s": 0.3,
            **options,
        }
        loop = Loop(Agent(SITE, backend, control_plane.url, TOKEN, **options))
        loops.append(loop)
        return loop

    yield start
    for loop in loops:
        if loop.thread.is_alive():
            loop.stop()


def attempt_in(body: dict[str, Any], attempt_id: str) -> dict[str, Any] | None:
    return next((a for a in body["attempts"] if a["attempt_id"] == attempt_id), None)


def reports(attempt_id: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    """A predicate: the sync reports ``attempt_id`` with these field values."""

    def check(body: dict[str, Any]) -> bool:
        a = attempt_in(body, attempt_id)
        return a is not None and all(a[k] == v for k, v in fields.items())

    return check


def wait_file(path: Path, text: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and text in path.read_text()):
        if time.monotonic() > deadline:
            pytest.fail(f"{path} never contained {text!r}")
        time.sleep(0.01)


def test_sync_body_follows_the_contract(control_plane: Any, start_agent: Any) -> None:
    loop = start_agent(pools={"H100": 8, "A100": 2})
    body = control_plane.wait_for(lambda b: True)
    assert body == {
        "agent_id": loop.agent.agent_id,
        "backend": "local",
        "capacity": {"H100": 8, "A100": 2},
        "problem": None,
        "attempts": [],
        "logs": [],
        "service_address": None,
        "links": [],
        "probe_clock_s": None,
        "data": None,  # an agent built without a data plane
    }


def test_run_order_starts_the_attempt_and_its_exit_and_logs_are_reported(
    control_plane: Any, start_agent: Any, make_run_order: Order
) -> None:
    script = "echo slots=$ONECLUSTER_GPU_SLOTS extra=$EXTRA; exit 3"
    control_plane.want(make_run_order("a1", script, gpus=2, env={"EXTRA": "from-server"}))
    start_agent()
    body = control_plane.wait_for(reports("a1", state="exited"))
    assert attempt_in(body, "a1")["exit_code"] == 3
    assert attempt_in(body, "a1")["job_id"] == "job-a1"
    control_plane.wait_for(lambda b: control_plane.logs_of("a1").endswith("\n"))
    assert control_plane.logs_of("a1") == "slots=0,1 extra=from-server\n"
    # The server records the exit and stops listing the attempt: the agent forgets it.
    control_plane.want()
    control_plane.wait_for(lambda b: b["attempts"] == [])


def test_a_repeated_run_order_never_starts_the_attempt_twice(
    control_plane: Any, start_agent: Any, make_run_order: Order, tmp_path: Path
) -> None:
    marker = tmp_path / "runs"
    order = make_run_order("a1", f"echo run >> {marker}")
    control_plane.want(order)
    start_agent()
    control_plane.wait_for(reports("a1", state="exited", exit_code=0))
    control_plane.wait_syncs(5)  # the fake keeps saying "run" for an exited attempt
    # Even after being unlisted (and forgotten), a repeated order must not start it again.
    control_plane.want()
    control_plane.wait_for(lambda b: b["attempts"] == [])
    control_plane.want(order)
    control_plane.wait_syncs(5)
    assert marker.read_text() == "run\n"
    # It does not hold it and will not start it again: it says so (lost) rather than stay
    # silent, which would leave the server waiting for it.
    assert all(reports("a1", state="lost")(b) for b in control_plane.syncs[-3:])


def test_stop_order_is_honoured_with_grace_then_kill(
    control_plane: Any, start_agent: Any, make_run_order: Order
) -> None:
    polite = make_run_order("polite", f"trap 'echo bye; exit 5' TERM; {IDLE}")
    stubborn = make_run_order("stubborn", f"trap 'echo no' TERM; {IDLE}")
    control_plane.want(polite, stubborn)
    start_agent()
    control_plane.wait_for(lambda b: "ready" in control_plane.logs_of("stubborn"))
    control_plane.wait_for(lambda b: "ready" in control_plane.logs_of("polite"))
    stop = {"action": "stop", "grace_s": 0.3, "reason": "preempted"}
    control_plane.want({**polite, **stop}, {**stubborn, **stop})
    control_plane.wait_for(reports("polite", state="exited", exit_code=5))
    control_plane.wait_for(reports("stubborn", state="exited", exit_code=137))
    control_plane.wait_for(lambda b: "SIGKILL" in control_plane.logs_of("stubborn"))
    assert "stopping (preempted): SIGTERM" in control_plane.logs_of("polite")
    assert "bye" in control_plane.logs_of("polite")
    assert "no\n" in control_plane.logs_of("stubborn")


def test_an_attempt_the_server_no_longer_lists_is_stopped_and_forgotten(
    control_plane: Any, start_agent: Any, make_run_order: Order
) -> None:
    control_plane.want(make_run_order("a1", IDLE))
    start_agent()
    control_plane.wait_for(reports("a1", state="running"))
    control_plane.want()
    control_plane.wait_for(reports("a1", state="exited", exit_code=143))
    control_plane.wait_for(lambda b: b["attempts"] == [])
    assert "the server no longer lists this attempt" in control_plane.logs_of("a1")


def test_a_start_refused_for_lack_of_slots_is_retried_when_slots_free(
    control_plane: Any, start_agent: Any, make_run_order: Order, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    first = make_run_order("first", f"while [ ! -e {go} ]; do sleep 0.02; done", gpus=6)
    second = make_run_order("second", "echo second got $ONECLUSTER_GPU_SLOTS", gpus=4)
    control_plane.want(first, second)
    start_agent()
    control_plane.wait_for(reports("first", state="running"))
    control_plane.wait_syncs(3)
    assert all(attempt_in(b, "second") is None for b in control_plane.syncs)
    go.touch()
    control_plane.wait_for(reports("second", state="exited", exit_code=0))
    control_plane.wait_for(lambda b: "second got" in control_plane.logs_of("second"))
    assert control_plane.logs_of("second") == "second got 0,1,2,3\n"


@pytest.mark.parametrize("outage", ["refused", "503", "drop"])
def test_jobs_keep_running_while_the_server_is_unreachable(
    control_plane: Any, start_agent: Any, make_run_order: Order, tmp_path: Path, outage: str
) -> None:
    go, pid = tmp_path / "go", tmp_path / "pid"
    script = f"echo $$ > {pid}; while [ ! -e {go} ]; do sleep 0.02; done; echo done"
    control_plane.want(make_run_order("a1", script))
    loop = start_agent()
    control_plane.wait_for(reports("a1", state="running"))
    wait_file(pid, "\n")
    if outage == "refused":
        control_plane.stop()
    else:
        control_plane.mode = outage
    deadline = time.monotonic() + 5
    while loop.agent.statistics().consecutive_failures < 3:
        assert time.monotonic() < deadline, "the agent never noticed the outage"
        time.sleep(0.01)
    assert loop.thread.is_alive()
    assert alive(int(pid.read_text()))
    go.touch()  # the job finishes during the outage
    deadline = time.monotonic() + 5
    while alive(int(pid.read_text())):
        assert time.monotonic() < deadline, "the job never finished"
        time.sleep(0.01)
    if outage == "refused":
        control_plane.start()  # same port
    control_plane.mode = "ok"
    control_plane.wait_for(reports("a1", state="exited", exit_code=0))
    control_plane.wait_for(lambda b: control_plane.logs_of("a1") == "done\n")
    assert loop.agent.statistics().consecutive_failures == 0


def test_an_agent_whose_lease_runs_out_stops_its_jobs_and_reports_them_lost(
    control_plane: Any, start_agent: Any, make_run_order: Order, tmp_path: Path
) -> None:
    # The server gives a silent site's work away after the lease; the agent must have
    # stopped it by then, or the job would run in two places (tests/agent/test_agent_lease.py
    # checks the timing on a manual clock).
    pid = tmp_path / "pid"
    control_plane.lease_s = 1.0
    control_plane.want(make_run_order("a1", f"echo $$ > {pid}; {IDLE}"))
    start_agent()
    control_plane.wait_for(reports("a1", state="running"))
    wait_file(pid, "\n")
    control_plane.mode = "503"
    deadline = time.monotonic() + 5
    while alive(int(pid.read_text())):
        assert time.monotonic() < deadline, "the agent kept running a job it may no longer own"
        time.sleep(0.02)
    control_plane.mode = "ok"
    control_plane.wait_for(reports("a1", state="lost", exit_code=143))
    assert "the agent could not renew its lease" in control_plane.logs_of("a1")


def test_log_output_is_shipped_in_capped_contiguous_chunks(
    control_plane: Any, start_agent: Any, make_run_order: Order
) -> None:
    # 3000 lines of 50 characters including a 2-byte one: about 150 KB.
    script = "i=0; while [ $i -lt 3000 ]; do printf '%048dé\\n' $i; i=$((i+1)); done"
    control_plane.want(make_run_order("a1", script))
    start_agent(log_chunk_bytes=65536)
    control_plane.wait_for(reports("a1", state="exited", exit_code=0))
    control_plane.wait_for(lambda b: len(control_plane.logs_of("a1")) == 3000 * 50)
    text = control_plane.logs_of("a1")
    assert text.splitlines()[2999] == f"{2999:048d}é"
    sizes = [len(c["data"].encode()) for b in control_plane.syncs for c in b["logs"]]
    assert max(sizes) <= 65536
    assert len(sizes) >= 3


def test_shutdown_stops_running_jobs_and_reports_them_lost(
    control_plane: Any, start_agent: Any, make_run_order: Order, tmp_path: Path
) -> None:
    pid = tmp_path / "pid"
    control_plane.want(make_run_order("a1", f"echo $$ > {pid}; {IDLE}"))
    loop = start_agent()
    control_plane.wait_for(reports("a1", state="running"))
    wait_file(pid, "\n")
    loop.stop()
    last = control_plane.syncs[-1]
    assert attempt_in(last, "a1") == {
        **attempt_in(last, "a1"),
        "state": "lost",
        "exit_code": 143,
    }
    assert not alive(int(pid.read_text()))

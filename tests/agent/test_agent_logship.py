"""Log shipping stays inside the server's body limit however much the attempts write."""

from __future__ import annotations

from pathlib import Path

from onecluster.agent._logship import LOG_BYTES_PER_SYNC, LogShipper
from onecluster.backends import AttemptStatus, LocalBackend
from onecluster.model import AttemptState
from onecluster.schema import MAX_LOG_CHARS, AgentSync
from onecluster.server._limits import SYNC_BODY_LIMIT


def _finished(backend_dir: Path, logs: dict[str, bytes]) -> list[AttemptStatus]:
    """Attempts that have exited, their logs written where the local backend keeps them."""
    for attempt_id, data in logs.items():
        (backend_dir / "attempts" / attempt_id).mkdir(parents=True)
        (backend_dir / "attempts" / attempt_id / "output.log").write_bytes(data)
    return [
        AttemptStatus(attempt_id=a, job_id=f"j-{a}", state=AttemptState.EXITED, exit_code=0)
        for a in logs
    ]


def _ship_all(shipper: LogShipper, statuses: list[AttemptStatus]) -> list[AgentSync]:
    bodies = []
    while len(shipper.drained) < len(statuses):
        batch = shipper.collect(statuses)
        bodies.append(AgentSync(agent_id="a-1", logs=list(batch.chunks)))
        shipper.commit(batch)
        assert len(bodies) < 100, "the logs never drained"
    return bodies


def test_one_sync_carries_at_most_a_mebibyte_and_every_byte_arrives_once(tmp_path: Path) -> None:
    logs = {f"a{i:02d}": (f"attempt {i} says hello\n" * 6000).encode() for i in range(40)}
    statuses = _finished(tmp_path, logs)
    shipper = LogShipper(LocalBackend("sha", {"H100": 8}, tmp_path))
    bodies = _ship_all(shipper, statuses)
    received: dict[str, str] = {}
    for body in bodies:
        assert sum(len(c.data.encode()) for c in body.logs) <= LOG_BYTES_PER_SYNC
        for chunk in body.logs:
            assert chunk.offset == len(received.get(chunk.attempt_id, ""))
            received[chunk.attempt_id] = received.get(chunk.attempt_id, "") + chunk.data
    assert received == {a: data.decode() for a, data in logs.items()}
    assert len(bodies) > 5  # 5.5 MiB in all: the cap really held some back


def test_the_attempts_that_waited_longest_go_first(tmp_path: Path) -> None:
    logs = {f"a{i:02d}": b"x" * 200_000 for i in range(40)}
    statuses = _finished(tmp_path, logs)
    shipper = LogShipper(LocalBackend("sha", {"H100": 8}, tmp_path))
    first = shipper.collect(statuses)
    shipper.commit(first)
    second = shipper.collect(statuses)
    served_first = {c.attempt_id for c in first.chunks}
    served_second = {c.attempt_id for c in second.chunks}
    assert len(served_first) == 16  # 16 x 64 KiB = 1 MiB
    assert not served_first & served_second
    shipper.commit(second)
    served_third = {c.attempt_id for c in shipper.collect(statuses).chunks}
    never_served = set(logs) - served_first - served_second
    assert len(never_served) == 8
    assert never_served < served_third  # then those served longest ago
    assert served_third - never_served < served_first


def test_a_worst_case_sync_fits_the_servers_limit(tmp_path: Path) -> None:
    """Control bytes escape to six bytes of JSON each; a chunk setting above the wire's bound
    is held to it (the server would refuse the sync, and the agent would fence its jobs)."""
    logs = {f"a{i:02d}": b"\x00\x01\x1b" * 100_000 for i in range(40)}
    statuses = _finished(tmp_path, logs)
    shipper = LogShipper(LocalBackend("sha", {"H100": 8}, tmp_path), chunk_bytes=10 << 20)
    for body in _ship_all(shipper, statuses):
        assert all(len(c.data) <= MAX_LOG_CHARS for c in body.logs)
        wire = body.model_dump_json().encode()
        assert len(wire) <= SYNC_BODY_LIMIT
        assert AgentSync.model_validate_json(wire) == body

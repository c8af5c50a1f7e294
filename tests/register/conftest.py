"""Registers on disk for the register's tests: a fixed clock, and one with known history."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from onecluster.clock import ManualClock
from onecluster.register import Register

#: 2026-11-20 12:00 UTC.
NOVEMBER = datetime(2026, 11, 20, 12, tzinfo=UTC).timestamp()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOVEMBER)


@pytest.fixture
def register(tmp_path: Path, clock: ManualClock) -> Iterator[Register]:
    with Register.open(tmp_path / "register", clock=clock, group_wait_s=0) as reg:
        yield reg


def intent(n: int) -> dict[str, object]:
    """An export's intent entry, as the gateway writes one."""
    return {
        "type": "intent",
        "export": f"exp-{n}",
        "dataset": "clinical-notes",
        "version": f"v{n}",
        "content_hash": f"{n:064x}",
        "bytes": 1000 + n,
        "destination": "sg-1",
        "relays": ["hk-1"],
        "categories": ["health", "contact"],
        "individuals": 10 * n,
        "requester": "alice",
        "approver": "bob",
    }


def append_together(register: Register, entries: list[dict[str, object]]) -> None:
    """Append ``entries`` from one thread each, all released at once (a barrier), so that
    they tend to share batches; returns when every append has returned."""
    barrier = threading.Barrier(len(entries))
    errors: list[BaseException] = []

    def run(entry: dict[str, object]) -> None:
        barrier.wait()
        try:
            register.append(entry)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller's assert
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(e,)) for e in entries]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def history(directory: Path, clock: ManualClock) -> None:
    """A closed register of 20 entries: 0–9 one per batch, 10–19 appended together (batches
    of several), so that every kind of tampering has something to hit."""
    with Register.open(directory, clock=clock, group_wait_s=0.05) as reg:
        for n in range(10):
            reg.append(intent(n))
            clock.advance(60)
        append_together(reg, [intent(n) for n in range(10, 20)])
        assert reg.size == 20

"""This replica's part in the election, on a real SQLite database: when it believes it
leads, and the term it fences its writes with.

The lease runs on the database's clock; this replica's own belief on an injected monotonic
clock, so that a replica frozen past its lease is a number, not a sleep.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.store.test_store_jobs import spec

from onecluster.clock import ManualClock
from onecluster.errors import NotLeaderError
from onecluster.model import JobState
from onecluster.server._election import Election
from onecluster.store import Store, fenced


class Monotonic:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(f"sqlite:///{tmp_path / 'state.db'}")
    yield s
    s.close()


def _election(store: Store, holder: str, monotonic: Monotonic, lease_s: float) -> Election:
    return Election(
        store,
        ManualClock(1.0),
        holder=holder,
        url=f"http://{holder}",
        lease_s=lease_s,
        monotonic=monotonic,
    )


def test_a_replica_believes_it_leads_only_until_its_own_earlier_end_of_the_lease(
    store: Store,
) -> None:
    mono = Monotonic()
    a = _election(store, "a", mono, lease_s=10.0)
    assert a.tick() and a.mandate() == 1
    mono.now += 8.9  # 0.9 of the lease after the renewal was sent: still leading
    assert a.mandate() == 1 and a.leading
    mono.now += 0.2  # frozen past its own end: it knows before it asks anyone
    assert a.mandate() is None and not a.leading
    assert a.tick() and a.mandate() == 1  # its lease held in the database: renewed, same term


def test_a_deposed_replica_sees_the_new_term_but_has_no_mandate_and_its_writes_are_refused(
    store: Store,
) -> None:
    mono = Monotonic()
    a = _election(store, "a", mono, lease_s=0.2)
    b = _election(store, "b", mono, lease_s=30.0)
    assert a.tick()
    assert not b.tick() and b.leader_url == "http://a"
    job = store.add_job(spec(), now=1.0)
    while not store.leader().vacant:  # a's lease runs out on the database's clock
        pass
    assert b.tick() and b.mandate() == 2
    assert not a.tick()
    assert a.term == 2 and a.mandate() is None  # it saw term 2; it does not lead in it
    stats = a.statistics()
    assert (stats.leading, stats.leader_url, stats.deposed) == (False, "http://b", 1)
    with fenced(a.term, a.holder), pytest.raises(NotLeaderError):
        store.cancel_job(job.id, now=2.0)
    assert store.job(job.id).state == JobState.PENDING


def test_a_refused_fenced_write_steps_the_replica_down_at_once(store: Store) -> None:
    mono = Monotonic()
    a = _election(store, "a", mono, lease_s=30.0)
    assert a.tick()
    a.step_down(a.term + 5)  # another term's refusal: not this one's
    assert a.mandate() == 1
    a.step_down(1)
    assert a.mandate() is None


def test_resigning_hands_the_lease_to_the_next_replica_at_once(store: Store) -> None:
    mono = Monotonic()
    a = _election(store, "a", mono, lease_s=30.0)
    b = _election(store, "b", mono, lease_s=30.0)
    assert a.tick() and not b.tick()
    a.resign()
    assert a.mandate() is None
    assert b.tick() and b.mandate() == 2
    assert [s.id for s in store.servers(seen_since=0.0)] == ["b"]

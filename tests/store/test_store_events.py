"""The event feed is gap-free: a follower paging with ``after`` sees every committed event
once, in id order, however many transactions write events at once and however long they
take (on PostgreSQL, where ids are drawn before commit, and on SQLite)."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from onecluster.model import JobSpec
from onecluster.store import Store
from onecluster.store._tables import EventRow, TokenRow
from onecluster.store._transitions import event

_WAIT_S = 30.0


def _committed_ids(store: Store) -> list[int]:
    with Session(store.engine) as s:
        return list(s.scalars(select(EventRow.id).order_by(EventRow.id)))


def _slow_transaction(store: Store, recorded: threading.Event, release: threading.Event) -> None:
    """Record an event, flush (drawing ids for whatever the session inserts), then hold the
    transaction open until ``release``: a slow writer."""
    with Session(store.engine) as s, s.begin():
        event(s, 1.0, "slow", "recorded first, committed last")
        s.flush()
        recorded.set()
        assert release.wait(_WAIT_S), "the test never released the slow transaction"


def test_an_event_committed_after_a_later_id_is_not_skipped(store: Store) -> None:
    """A follower that read past a later id still gets the event of a slower transaction
    that recorded its event first (the gap ids drawn at insert time used to leave)."""
    if store.engine.dialect.name != "postgresql":
        pytest.skip("SQLite runs one writer at a time: the slow one would block the fast one")
    recorded, release = threading.Event(), threading.Event()
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(_slow_transaction, store, recorded, release)
        assert recorded.wait(_WAIT_S)
        store.add_events([("fast", "recorded second, committed first")], now=2.0)
        first = store.events(after=0)
        release.set()
        slow.result(timeout=_WAIT_S)
    rest = store.events(after=first[-1].id)
    seen = first + rest
    assert [e.kind for e in seen] == ["fast", "slow"]
    assert [e.id for e in seen] == _committed_ids(store)


def test_the_events_sequence_hands_out_ids_one_at_a_time(store: Store) -> None:
    """Ids are in commit order only if no connection caches a block of them ahead."""
    if store.engine.dialect.name != "postgresql":
        pytest.skip("SQLite draws a rowid at insert, from the table itself")
    with Session(store.engine) as s:
        cache = s.scalar(
            text("SELECT cache_size FROM pg_sequences WHERE sequencename = 'events_id_seq'")
        )
    assert cache == 1


def test_events_of_a_transaction_that_rolls_back_are_not_written(store: Store) -> None:
    with Session(store.engine) as s:
        with s.begin():
            event(s, 1.0, "doomed", "never committed")
            s.rollback()
        with s.begin():
            event(s, 2.0, "kept", "committed")
    assert [e.kind for e in store.events(after=0)] == ["kept"]


def test_events_are_written_after_the_other_writes_of_their_transaction(store: Store) -> None:
    """An event recorded before other writes is inserted at commit, after them, with those
    writes (rows of the same transaction) committed together."""
    with Session(store.engine) as s, s.begin():
        event(s, 1.0, "token_added", "a token row follows")
        s.add(TokenRow(id="t1", role="admin", sha256="0" * 64, created_at=1.0, revoked=False))
    assert store.token("0" * 64) is not None
    assert [e.kind for e in store.events(after=0)] == ["token_added"]


# -- many writers, one follower ----------------------------------------------------------


def _writer(stores: list[Store], seed: int, rounds: int) -> None:
    """Transactions of varied kinds and lengths: group-committed submissions (Core insert),
    plain events, cancellations (row locks, then an event), and long ones that record an
    event first and do other work after it."""
    rng = random.Random(seed)
    for i in range(rounds):
        store = stores[rng.randrange(len(stores))]
        what = rng.randrange(4)
        if what == 0:
            specs = [JobSpec(team="llm", gpus=1, duration_s=60.0)] * rng.randint(1, 20)
            store.add_jobs(specs, now=float(i))
        elif what == 1:
            store.add_events([("note", f"{seed}.{i}.{n}") for n in range(rng.randint(1, 5))], now=0)
        elif what == 2:
            job = store.add_job(JobSpec(team="llm", gpus=1, duration_s=60.0), now=float(i))
            store.cancel_job(job.id, now=float(i))
        else:
            _long_transaction(store, rng.randint(1, 40), f"{seed}.{i}")


def _long_transaction(store: Store, statements: int, tag: str) -> None:
    with Session(store.engine) as s, s.begin():
        event(s, 0.0, "long", f"{tag} recorded first")
        s.flush()
        for _ in range(statements):
            s.execute(select(EventRow.id).order_by(EventRow.id.desc()).limit(1))
        event(s, 0.0, "long", f"{tag} recorded last")


def _follow(store: Store, done: Callable[[], bool], seed: int) -> list[int]:
    rng = random.Random(seed)
    seen: list[int] = []
    cursor = 0
    while True:
        finished = done()  # read before the page: a page read after it is the last word
        page = store.events(after=cursor, limit=rng.randint(1, 9))
        seen += [e.id for e in page]
        if page:
            cursor = page[-1].id
        elif finished:
            return seen


def test_a_follower_sees_every_event_once_in_order_under_concurrent_writers(
    store: Store,
) -> None:
    """Four writers on two stores (two servers on one database) and a follower paging with
    ``after`` while they write: it sees exactly the committed ids, each once, in order."""
    other = Store.open(store.engine.url.render_as_string(hide_password=False))
    stores = [store, other]
    writers_done = threading.Event()
    with ThreadPoolExecutor(5) as pool:
        follower = pool.submit(_follow, store, writers_done.is_set, 99)
        writers = [pool.submit(_writer, stores, seed, 40) for seed in range(4)]
        for w in writers:
            w.result(timeout=120)
        writers_done.set()
        seen = follower.result(timeout=120)
    other.close()
    committed = _committed_ids(store)
    assert len(committed) > 200
    assert seen == committed

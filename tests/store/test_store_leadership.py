"""The leadership lease and its fence, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading

import pytest
from tests.store.test_store_jobs import spec

from onecluster.errors import NotLeaderError
from onecluster.model import JobState
from onecluster.store import ServerRecord, Store, fenced


def test_the_first_server_takes_the_vacant_lease_and_renews_it_with_the_same_term(
    store: Store,
) -> None:
    first = store.lead("a", url="http://a", lease_s=30.0, now=1.0)
    assert first.held_by("a") and first.term == 1 and first.url == "http://a"
    again = store.lead("a", url="http://a", lease_s=30.0, now=2.0)
    assert again.term == 1 and again.expires_at >= first.expires_at
    assert [e.kind for e in store.events(kind_prefix="leader")] == ["leader_elected"]


def test_a_second_server_follows_while_the_lease_holds_and_takes_it_when_it_lapses(
    store: Store,
) -> None:
    store.lead("a", url="http://a", lease_s=0.2, now=1.0)
    seen = store.lead("b", url="http://b", lease_s=0.2, now=1.0)
    assert not seen.held_by("b") and seen.held_by("a")
    # Wait on the database's clock, not ours: the lease is in its time.
    while not store.leader().vacant:
        pass
    taken = store.lead("b", url="http://b", lease_s=30.0, now=2.0)
    assert taken.held_by("b") and taken.term == 2
    assert [e.message for e in store.events(kind_prefix="leader")][-1].startswith("http://b")


def test_a_deposed_leaders_fenced_write_is_refused_and_changes_nothing(store: Store) -> None:
    old = store.lead("a", url=None, lease_s=0.2, now=1.0)
    job = store.add_job(spec(), now=1.0)
    while not store.leader().vacant:
        pass
    store.lead("b", url=None, lease_s=30.0, now=2.0)
    with fenced(old.term, "a"), pytest.raises(NotLeaderError, match="taken over"):
        store.cancel_job(job.id, now=3.0)
    assert store.job(job.id).state == JobState.PENDING


def test_a_deposed_leader_that_learnt_the_new_term_still_cannot_write_with_it(
    store: Store,
) -> None:
    store.lead("a", url=None, lease_s=0.2, now=1.0)
    job = store.add_job(spec(), now=1.0)
    while not store.leader().vacant:
        pass
    new = store.lead("b", url=None, lease_s=30.0, now=2.0)
    with fenced(new.term, "a"), pytest.raises(NotLeaderError, match="taken over"):
        store.cancel_job(job.id, now=3.0)
    assert store.job(job.id).state == JobState.PENDING


def test_a_lapsed_lease_refuses_fenced_writes_until_it_is_taken_again(store: Store) -> None:
    held = store.lead("a", url=None, lease_s=0.2, now=1.0)
    job = store.add_job(spec(), now=1.0)
    while not store.leader().vacant:
        pass
    with fenced(held.term, "a"), pytest.raises(NotLeaderError, match="lapsed"):
        store.cancel_job(job.id, now=3.0)
    again = store.lead("a", url=None, lease_s=30.0, now=4.0)
    assert again.term == held.term + 1
    with fenced(again.term, "a"):
        store.cancel_job(job.id, now=5.0)
    assert store.job(job.id).state == JobState.CANCELLED


def test_reads_and_unfenced_writes_go_on_whoever_leads(store: Store) -> None:
    store.lead("a", url=None, lease_s=30.0, now=1.0)
    with fenced(99, "a"):
        assert store.pending_jobs() == []  # a read is never fenced
    assert store.add_job(spec(), now=1.0).state == JobState.PENDING


def test_resigning_frees_the_lease_at_once(store: Store) -> None:
    held = store.lead("a", url=None, lease_s=30.0, now=1.0)
    assert not store.resign("b", held.term, now=2.0)
    assert store.resign("a", held.term, now=2.0)
    assert store.leader().vacant
    assert store.lead("b", url=None, lease_s=30.0, now=3.0).held_by("b")
    kinds = [e.kind for e in store.events(kind_prefix="leader")]
    assert kinds == ["leader_elected", "leader_resigned", "leader_elected"]


def test_of_two_servers_racing_for_a_vacant_lease_exactly_one_wins(store: Store) -> None:
    results: dict[str, bool] = {}
    start = threading.Barrier(4)

    def race(name: str) -> None:
        start.wait()
        results[name] = store.lead(name, url=None, lease_s=30.0, now=1.0).held_by(name)

    threads = [threading.Thread(target=race, args=(n,)) for n in "abcd"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results.values()) == [False, False, False, True]
    assert store.leader().term == 1


def test_queue_news_names_jobs_submitted_since_the_cursor_and_the_epoch_moves_on_cancel(
    store: Store,
) -> None:
    start = store.queue_news(None)
    first = store.add_job(spec(), now=1.0)
    second = store.add_job(spec(), now=2.0)
    news = store.queue_news(start.cursor)
    assert news.submitted == (first.id, second.id) and news.epoch == start.epoch
    assert store.queue_news(news.cursor).submitted == ()
    store.cancel_job(first.id, now=3.0)
    later = store.queue_news(news.cursor)
    assert later.epoch == start.epoch + 1
    assert [j.id for j in store.pending_of([first.id, second.id])] == [second.id]


def test_servers_are_listed_while_they_are_seen(store: Store) -> None:
    store.note_server(ServerRecord(id="a", url="http://a", version="1", started_at=1, seen_at=5))
    store.note_server(ServerRecord(id="b", url=None, version="1", started_at=2, seen_at=9))
    assert [s.id for s in store.servers(seen_since=6)] == ["b"]
    store.note_server(ServerRecord(id="a", url="http://a", version="1", started_at=1, seen_at=10))
    assert [s.id for s in store.servers(seen_since=6)] == ["a", "b"]
    store.forget_server("a")
    assert [s.id for s in store.servers(seen_since=0)] == ["b"]

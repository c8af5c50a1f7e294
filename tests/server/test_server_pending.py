"""The pending-queue cache of the reconcile loop follows the database without re-reading it
on every pass."""

from __future__ import annotations

from onecluster.model import JobSpec
from onecluster.scheduler import PendingJob
from onecluster.server._pending import PendingMirror


def pj(job_id: str) -> PendingJob:
    return PendingJob(job_id=job_id, spec=JobSpec(team="t", gpus=1, duration_s=1), submitted_at=0)


class FakeDatabase:
    """A fake of the two store calls the mirror makes: the pending set and its epoch."""

    def __init__(self) -> None:
        self.rows: list[PendingJob] = []
        self.epoch = 0
        self.loads = 0

    def load(self) -> list[PendingJob]:
        self.loads += 1
        return list(self.rows)


def make() -> tuple[FakeDatabase, PendingMirror]:
    db = FakeDatabase()
    return db, PendingMirror(db.load, lambda: db.epoch)


def ids(mirror: PendingMirror) -> list[str]:
    with mirror.for_pass() as q:
        return sorted(j.job_id for j in q)


def test_submissions_are_added_without_a_reload() -> None:
    db, mirror = make()
    assert ids(mirror) == []
    assert db.loads == 1
    db.rows.append(pj("a"))
    mirror.added(pj("a"))
    assert ids(mirror) == ["a"]
    assert db.loads == 1


def test_a_requeue_elsewhere_triggers_one_reload() -> None:
    db, mirror = make()
    ids(mirror)
    db.rows.append(pj("requeued"))
    db.epoch += 1
    assert ids(mirror) == ["requeued"]
    assert ids(mirror) == ["requeued"]
    assert db.loads == 2


def test_started_jobs_leave_and_invalidate_reloads() -> None:
    db, mirror = make()
    db.rows = [pj("a"), pj("b")]
    assert ids(mirror) == ["a", "b"]
    mirror.started(["a"])
    assert ids(mirror) == ["b"]
    mirror.invalidate()
    assert ids(mirror) == ["a", "b"]  # the database is the truth


def test_a_submission_during_a_reload_is_neither_lost_nor_doubled() -> None:
    db = FakeDatabase()
    late = pj("late")

    def load_and_submit() -> list[PendingJob]:
        rows = db.load()
        mirror.added(late)  # commits after the reload read the table
        mirror.added(late)  # and an idempotent retry
        return rows

    mirror = PendingMirror(load_and_submit, lambda: db.epoch)
    assert ids(mirror) == ["late"]


def test_a_follower_keeps_no_queue_and_reads_it_whole_when_it_takes_office() -> None:
    db, mirror = make()
    ids(mirror)
    mirror.stand_by()
    for n in range(1000):  # submissions at a follower: none is kept
        db.rows.append(pj(f"j{n:04}"))
        mirror.added(pj(f"j{n:04}"))
    assert mirror.standing_by and len(mirror._queue) == 0
    loads = db.loads
    mirror.resume()
    assert len(ids(mirror)) == 1000 and db.loads == loads + 1
    mirror.added(pj("j9999"))  # leading again: a submission is queued as before
    assert "j9999" in ids(mirror)

"""How long each site pair's transfers have gone without progress (``ProgressAges``, pure)."""

from __future__ import annotations

from dataclasses import replace

from onecluster.server._transfer_progress import ProgressAges
from onecluster.store import TransferRecord

T0 = 1_000.0


def transfer(
    id_: str = "t-1", *, state: str = "running", done: int = 0, **more: object
) -> TransferRecord:
    base = TransferRecord(
        id=id_,
        dataset="cc-zh",
        root="r" * 64,
        src="shanghai",
        dst="singapore",
        reason="push",
        job_id=None,
        state="running",
        bytes_total=1000,
        bytes_done=0,
        bytes_sent=0,
        bytes_local=0,
        chunks_total=10,
        chunks_done=0,
        chunks_sent=0,
        paths=(),
        rate_bps=0.0,
        error=None,
        ticket="x",
        created_at=T0 - 50,
        started_at=T0 - 30,
        finished_at=None,
    )
    return replace(base, state=state, bytes_done=done, **more)  # type: ignore[arg-type]


def test_a_transfer_that_never_moved_is_as_old_as_its_start() -> None:
    ages = ProgressAges()
    assert ages.look([transfer()], T0) == {("shanghai", "singapore"): 30.0}
    assert ages.look([transfer(started_at=None)], T0) == {("shanghai", "singapore"): 30.0}
    assert ProgressAges().look([transfer(started_at=None)], T0) == {("shanghai", "singapore"): 50.0}


def test_progress_resets_the_age_and_its_absence_lets_it_grow() -> None:
    ages = ProgressAges()
    ages.look([transfer(done=100)], T0)  # first seen part-way: taken as progress now
    assert ages.look([transfer(done=100)], T0 + 40) == {("shanghai", "singapore"): 40.0}
    assert ages.look([transfer(done=200)], T0 + 50) == {("shanghai", "singapore"): 0.0}
    assert ages.look([transfer(done=200, state="waiting")], T0 + 650) == {
        ("shanghai", "singapore"): 600.0
    }


def test_the_oldest_of_a_pair_counts_and_queued_or_ended_ones_do_not() -> None:
    ages = ProgressAges()
    ages.look([transfer("a", done=10), transfer("b", done=10)], T0)
    seen = ages.look(
        [transfer("a", done=10), transfer("b", done=20), transfer("c", state="queued")], T0 + 90
    )
    assert seen == {("shanghai", "singapore"): 90.0}
    assert ages.look([transfer("b", done=20)], T0 + 100) == {("shanghai", "singapore"): 10.0}
    assert ages.look([transfer("a", done=10)], T0 + 100) == {("shanghai", "singapore"): 0.0}

"""How long each site pair's transfers have gone without progress (``ProgressAges``, pure)."""

from __future__ import annotations

from test_server_data_orders import transfer as a_transfer  # a running transfer, factory

from onecluster.server._transfer_progress import ProgressAges
from onecluster.store import TransferRecord

T0 = 1_000.0


def transfer(
    id_: str = "t-1", *, state: str = "running", done: int = 0, **more: object
) -> TransferRecord:
    """A transfer from shanghai to singapore, created at T0 - 50 and started at T0 - 30."""
    times: dict[str, object] = {"created_at": T0 - 50, "started_at": T0 - 30}
    return a_transfer(
        "shanghai", "singapore", id=id_, state=state, bytes_done=done, **(times | more)
    )


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

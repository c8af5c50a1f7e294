"""SlotPool: numbered GPU slots per type, handed out all-or-nothing and never over-committed."""

from __future__ import annotations

import pytest

from onecluster.backends import SlotPool
from onecluster.errors import BackendError, ValidationError


def test_take_hands_out_lowest_free_ids_and_give_back_frees_them() -> None:
    pool = SlotPool({"H100": 8, "A100": 2})
    assert pool.take("a", "H100", 3) == (0, 1, 2)
    assert pool.take("b", "H100", 2) == (3, 4)
    pool.give_back("a")
    assert pool.take("c", "H100", 4) == (0, 1, 2, 5)
    assert {u.gpu_type: u.free for u in pool.usage()} == {"H100": 2, "A100": 2}


def test_take_refuses_more_than_free_and_takes_nothing() -> None:
    pool = SlotPool({"H100": 4})
    pool.take("a", "H100", 3)
    with pytest.raises(BackendError, match="needs 2 H100 GPUs but only 1 of 4 are free"):
        pool.take("b", "H100", 2)
    assert pool.take("b", "H100", 1) == (3,)


def test_unknown_type_and_double_take_are_refused() -> None:
    pool = SlotPool({"H100": 4})
    with pytest.raises(BackendError, match="no A100 GPUs"):
        pool.take("a", "A100", 1)
    pool.take("a", "H100", 1)
    with pytest.raises(BackendError, match="already holds"):
        pool.take("a", "H100", 1)


def test_give_back_is_idempotent() -> None:
    pool = SlotPool({"H100": 2})
    pool.take("a", "H100", 2)
    pool.give_back("a")
    pool.give_back("a")
    assert pool.usage()[0].free == 2


@pytest.mark.parametrize("pools", [{}, {"H100": 0}, {"": 3}])
def test_bad_pools_are_rejected(pools: dict[str, int]) -> None:
    with pytest.raises(ValidationError):
        SlotPool(pools)

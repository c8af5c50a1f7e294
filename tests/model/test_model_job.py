"""A job's checkpoint declaration and what a preemption keeps of its work."""

from __future__ import annotations

import pytest

from onecluster.errors import ValidationError
from onecluster.model import JobSpec, kept_after


@pytest.mark.parametrize("bad", [0.0, -5.0, 5e-324, 0.5, float("nan"), float("inf")])
def test_a_checkpoint_interval_is_a_finite_second_or_more(bad: float) -> None:
    with pytest.raises(ValidationError, match="checkpoint interval"):
        JobSpec(team="t", gpus=1, duration_s=60, checkpoint_interval_s=bad)


def test_a_preemption_keeps_whole_intervals_or_everything_on_sigterm() -> None:
    spec = JobSpec(team="t", gpus=1, duration_s=60, checkpoint_interval_s=50)
    assert spec.kept_after(110) == 100
    assert JobSpec(team="t", gpus=1, duration_s=60, checkpoint_on_sigterm=True).kept_after(7) == 7
    assert JobSpec(team="t", gpus=1, duration_s=60).kept_after(99) == 0
    assert kept_after(10.0, 5e-324, on_sigterm=False) == 10.0, "no overflow for a tiny interval"

import pytest

from onecluster.errors import ValidationError
from onecluster.workload import TraceJob, at_load, offered_load


def jobs() -> list[TraceJob]:
    # 300 GPU-seconds asked by jobs arriving over 100 s.
    return [
        TraceJob(submit_time=10, duration_s=100, gpus=1, team="t"),
        TraceJob(submit_time=60, duration_s=50, gpus=2, team="t"),
        TraceJob(submit_time=110, duration_s=100, gpus=1, team="t"),
    ]


def test_offered_load_is_gpu_seconds_over_capacity_of_the_arrival_span() -> None:
    # 300 GPU-seconds asked over 100 s of arrivals on 4 GPUs.
    assert offered_load(jobs(), 4) == pytest.approx(0.75)


def test_at_load_compresses_arrivals_and_keeps_run_times() -> None:
    scaled, factor = at_load(jobs(), 4, 1.5)
    assert factor == pytest.approx(2.0)
    assert [j.submit_time for j in scaled] == pytest.approx([0, 25, 50])
    assert [j.duration_s for j in scaled] == [100, 50, 100]
    assert offered_load(scaled, 4) == pytest.approx(1.5)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((jobs()[:1], 4), "two different times"),
        ((jobs(), 0), "with GPUs"),
    ],
)
def test_offered_load_refuses_what_has_no_answer(
    args: tuple[list[TraceJob], int], words: str
) -> None:
    with pytest.raises(ValidationError, match=words):
        offered_load(*args)


def test_at_load_refuses_a_non_positive_load() -> None:
    with pytest.raises(ValidationError, match="greater than 0"):
        at_load(jobs(), 4, 0)

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onecluster.telemetry import RTT_BUCKETS_S, Outcome, ProbeWindow


def test_rfc3550_jitter_is_the_smoothed_mean_of_transit_differences() -> None:
    w = ProbeWindow()
    # transit times 10, 12, 10, 16 ms: |D| = 2, 2, 6 ms; J += (|D| - J) / 16 each time
    sent = [0, 100, 200, 300]
    transit_ms = [10, 12, 10, 16]
    for s, t in zip(sent, transit_ms, strict=True):
        w.transit(s * 1_000_000, (s + t) * 1_000_000)
    j = 0.0
    for d in (0.002, 0.002, 0.006):
        j += (d - j) / 16
    assert w.figures().jitter_s == pytest.approx(j)


def test_the_clock_offset_between_ends_cancels_out_of_the_jitter() -> None:
    a, b = ProbeWindow(), ProbeWindow()
    for i, transit in enumerate((5_000_000, 7_000_000, 6_000_000)):
        a.transit(i * 10**8, i * 10**8 + transit)
        b.transit(i * 10**8, i * 10**8 + transit + 3_600 * 10**9)  # far end an hour off
    assert a.figures().jitter_s == pytest.approx(b.figures().jitter_s)


def test_loss_rtt_and_pdv_percentiles_over_the_window() -> None:
    w = ProbeWindow(window_s=10.0)
    rtts = [0.070 + 0.001 * (i % 10) for i in range(98)]
    for i, rtt in enumerate(rtts):
        w.add(Outcome(seq=i, sent_at=i * 0.1, rtt_s=rtt))
    w.add(Outcome(seq=98, sent_at=9.8, rtt_s=None))
    w.add(Outcome(seq=99, sent_at=9.9, rtt_s=None))
    f = w.figures()
    assert f.samples == 100
    assert f.loss == pytest.approx(0.02)
    assert f.rtt_min_s == pytest.approx(0.070)
    assert f.rtt_p50_s == pytest.approx(0.074)
    assert f.rtt_p99_s == pytest.approx(0.079)
    assert f.pdv_p99_s == pytest.approx(0.009)
    assert w.consecutive_losses() == 2
    assert (w.sent, w.received, w.lost) == (100, 98, 2)


def test_old_outcomes_leave_the_window_but_not_the_totals() -> None:
    w = ProbeWindow(window_s=1.0)
    w.add(Outcome(seq=0, sent_at=0.0, rtt_s=None))
    w.add(Outcome(seq=1, sent_at=5.0, rtt_s=0.010))
    f = w.figures()
    assert (f.samples, f.loss) == (1, 0.0)
    assert (w.sent, w.lost) == (2, 1)


def test_the_histogram_puts_each_rtt_in_the_first_bucket_that_holds_it() -> None:
    w = ProbeWindow()
    for seq, rtt in enumerate((0.00004, 0.068, 0.068, 3.0)):
        w.add(Outcome(seq=seq, sent_at=float(seq), rtt_s=rtt))
    counts = dict(zip(RTT_BUCKETS_S, w.bucket_counts, strict=True))
    assert counts[0.00005] == 1
    assert counts[0.075] == 2
    assert sum(w.bucket_counts) == 3  # 3 s is beyond the last bucket: only in +Inf
    assert w.rtt_sum_s == pytest.approx(0.00004 + 0.136 + 3.0)


def test_a_window_with_no_reply_has_no_rtt() -> None:
    w = ProbeWindow()
    w.add(Outcome(seq=0, sent_at=0.0, rtt_s=None))
    f = w.figures()
    assert f.rtt_min_s is None and f.pdv_p99_s is None
    assert f.loss == 1.0


@given(
    st.lists(
        st.tuples(
            st.floats(min_value=0.0, max_value=3.0),  # time since the previous probe
            st.one_of(st.none(), st.floats(min_value=0.0001, max_value=1.0)),
        ),
        max_size=300,
    )
)
def test_the_kept_rtt_floor_is_always_the_windows_minimum(
    probes: list[tuple[float, float | None]],
) -> None:
    w = ProbeWindow(window_s=10.0)
    sent = 0.0
    kept: list[Outcome] = []
    for seq, (gap, rtt) in enumerate(probes):
        sent += gap
        o = Outcome(seq=seq, sent_at=sent, rtt_s=rtt)
        w.add(o)
        kept = [k for k in [*kept, o] if k.sent_at >= sent - 10.0]
        rtts = [k.rtt_s for k in kept if k.rtt_s is not None]
        assert w.rtt_floor() == (min(rtts) if rtts else None)

"""The quota arithmetic, pure: windows, the inclusive boundary, and (Hypothesis) that no
sequence of admissions and settlements ever counts more than a limit."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from onecluster.gateway._quota import (
    Admitted,
    Ask,
    Counter,
    Limit,
    Limits,
    Period,
    Refused,
    ScopeState,
    TooLarge,
    bucket_of,
    decide,
    retry_after,
    settlement,
)

T = datetime(2026, 12, 31, 23, 59, 30, tzinfo=UTC).timestamp()


def state(
    limits: Limits, minute: Counter | None = None, money: Counter | None = None
) -> ScopeState:
    return ScopeState("team:a", limits, minute or Counter(), money or Counter(), money or Counter())


def test_windows_and_retry_after_follow_utc() -> None:
    assert bucket_of(Period.MONTH, T) == 2026 * 12 + 11
    assert bucket_of(Period.MONTH, T + 31) == 2027 * 12
    assert retry_after(Limit.RPM, T) == 30
    assert retry_after(Limit.DAILY, T) == 30
    assert retry_after(Limit.MONTHLY, T) == 30  # the year turns too
    assert retry_after(Limit.MONTHLY, T + 31) == 31 * 86_400 - 1


def test_the_boundary_is_inclusive() -> None:
    limits = Limits(rpm=3, tpm=100, daily=None, monthly=None)
    assert isinstance(
        decide([state(limits, Counter(requests=2, tokens=60))], Ask(40, 0), T), Admitted
    )
    refused = decide([state(limits, Counter(requests=2, tokens=61))], Ask(40, 0), T)
    assert isinstance(refused, Refused) and refused.limit is Limit.TPM
    refused = decide([state(limits, Counter(requests=3))], Ask(1, 0), T)
    assert isinstance(refused, Refused) and refused.limit is Limit.RPM
    assert isinstance(decide([state(limits)], Ask(101, 0), T), TooLarge)


def test_reservations_count_until_settled() -> None:
    limits = Limits(rpm=None, tpm=None, daily=1000, monthly=None)
    busy = state(limits, money=Counter(spend=500, reserved_spend=400))
    assert isinstance(decide([busy], Ask(0, 100), T), Admitted)
    assert isinstance(decide([busy], Ask(0, 101), T), Refused)
    minute, money = settlement(Ask(50, 400), tokens=20, spend=150)
    assert (minute.tokens, minute.reserved_tokens) == (20, -50)
    assert (money.spend, money.reserved_spend) == (150, -400)
    assert (minute.requests, money.requests) == (0, 0)  # an answered call keeps its request


def test_a_call_no_upstream_answered_gives_its_request_back() -> None:
    minute, money = settlement(Ask(50, 400), tokens=0, spend=0, answered=False)
    assert (minute.requests, minute.tokens, minute.reserved_tokens) == (-1, 0, -50)
    assert (money.requests, money.spend, money.reserved_spend) == (-1, 0, -400)


def test_every_scope_must_admit() -> None:
    team = state(Limits(rpm=100, tpm=None, daily=None, monthly=None))
    key = ScopeState(
        "key:k",
        Limits(rpm=1, tpm=None, daily=None, monthly=None),
        Counter(requests=1),
        Counter(),
        Counter(),
    )
    refused = decide([team, key], Ask(1, 0), T)
    assert isinstance(refused, Refused) and refused.scope == "key:k"


@given(
    limit=st.integers(0, 500),
    calls=st.lists(st.tuples(st.integers(1, 60), st.integers(0, 60), st.booleans()), max_size=40),
)
def test_settled_usage_never_passes_a_limit_when_usage_stays_within_the_reservation(
    limit: int, calls: list[tuple[int, int, bool]]
) -> None:
    """Admit, hold and settle in any interleaving: what is counted stays ≤ the limit."""
    limits = Limits(rpm=None, tpm=limit, daily=None, monthly=None)
    counter = Counter()
    held: list[tuple[Ask, int]] = []
    for reserve, actual, settle_now in calls:
        ask = Ask(reserve, 0)
        decision = decide([state(limits, counter)], ask, T)
        if isinstance(decision, Admitted):
            counter = Counter(
                tokens=counter.tokens, reserved_tokens=counter.reserved_tokens + reserve
            )
            held.append((ask, min(actual, reserve)))
        if settle_now and held:
            done, used = held.pop(0)
            minute, _ = settlement(done, used, 0)
            counter = Counter(
                tokens=counter.tokens + minute.tokens,
                reserved_tokens=counter.reserved_tokens + minute.reserved_tokens,
            )
        assert counter.tokens + counter.reserved_tokens <= limit

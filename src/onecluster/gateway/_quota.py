"""Quota arithmetic, pure: windows, limits, the admission decision and the settlement.

Every limit is a fixed window in UTC: requests and tokens per *minute*, spend per *day* and
per *month*.  A call is admitted when, in every scope it counts against (its team, and its key
when the key has limits of its own), what is already counted plus what is reserved plus what
this call reserves stays **at or under** the limit (``<=``, so a limit of 0 admits nothing
that costs anything).  A call reserves an upper bound of its tokens and cost; when it ends,
the reservation is replaced by what the provider reported (:func:`settlement`).  The store
applies both inside one transaction shared by every gateway process, so limits hold exactly
however many processes serve a team.
"""

from __future__ import annotations

import calendar
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

__all__ = [
    "Admitted",
    "Ask",
    "Counter",
    "Limit",
    "Limits",
    "Period",
    "Refused",
    "ScopeState",
    "TooLarge",
    "bucket_of",
    "decide",
    "retry_after",
    "settlement",
]


class Period(StrEnum):
    """The fixed windows limits are counted in."""

    MINUTE = "minute"
    DAY = "day"
    MONTH = "month"


class Limit(StrEnum):
    """The four limits of a tier."""

    RPM = "rpm"
    TPM = "tpm"
    DAILY = "daily_spend"
    MONTHLY = "monthly_spend"


_PERIOD_OF = {
    Limit.RPM: Period.MINUTE,
    Limit.TPM: Period.MINUTE,
    Limit.DAILY: Period.DAY,
    Limit.MONTHLY: Period.MONTH,
}


def bucket_of(period: Period, now: float) -> int:
    """The window ``now`` falls in: minutes or days since the epoch, or ``year * 12 + month``."""
    if period is Period.MINUTE:
        return int(now // 60)
    if period is Period.DAY:
        return int(now // 86_400)
    moment = datetime.fromtimestamp(now, UTC)
    return moment.year * 12 + moment.month - 1


def _window_end(period: Period, bucket: int) -> float:
    if period is Period.MINUTE:
        return (bucket + 1) * 60.0
    if period is Period.DAY:
        return (bucket + 1) * 86_400.0
    year, month = divmod(bucket + 1, 12)
    return float(calendar.timegm((year, month + 1, 1, 0, 0, 0)))


def retry_after(limit: Limit, now: float) -> int:
    """Whole seconds until ``limit``'s window turns over (at least 1)."""
    period = _PERIOD_OF[limit]
    return max(1, math.ceil(_window_end(period, bucket_of(period, now)) - now))


@dataclass(frozen=True, slots=True)
class Limits:
    """One scope's limits; spend in nano-units.  ``None`` = no limit of that kind."""

    rpm: int | None
    tpm: int | None
    daily: int | None
    monthly: int | None


@dataclass(frozen=True, slots=True)
class Counter:
    """What one scope has used in one window, and what calls in flight have reserved."""

    requests: int = 0
    tokens: int = 0
    reserved_tokens: int = 0
    spend: int = 0
    reserved_spend: int = 0


@dataclass(frozen=True, slots=True)
class Ask:
    """What one call reserves: an upper bound of its tokens and its cost (nano-units)."""

    tokens: int
    spend: int


@dataclass(frozen=True, slots=True)
class ScopeState:
    """A scope (``team:<name>`` or ``key:<id>``), its limits and its current windows."""

    scope: str
    limits: Limits
    minute: Counter
    day: Counter
    month: Counter


@dataclass(frozen=True, slots=True)
class Admitted:
    """The call may go; what is left in its tightest scope after its reservation."""

    remaining_requests: int | None
    remaining_tokens: int | None


@dataclass(frozen=True, slots=True)
class Refused:
    """Over a limit now; waiting ``retry_after`` seconds opens a new window."""

    scope: str
    limit: Limit
    value: int
    retry_after: int


@dataclass(frozen=True, slots=True)
class TooLarge:
    """The call alone needs more than the limit allows in a whole window: waiting cannot help."""

    scope: str
    limit: Limit
    value: int
    needed: int


Decision = Admitted | Refused | TooLarge


def decide(states: list[ScopeState], ask: Ask, now: float) -> Decision:
    """Admit the call, or name the first limit it would pass (``<=`` is within the limit)."""
    remaining_requests: int | None = None
    remaining_tokens: int | None = None
    for state in states:
        lim = state.limits
        checks = (
            (Limit.RPM, lim.rpm, 1, state.minute.requests),
            (Limit.TPM, lim.tpm, ask.tokens, state.minute.tokens + state.minute.reserved_tokens),
            (Limit.DAILY, lim.daily, ask.spend, state.day.spend + state.day.reserved_spend),
            (
                Limit.MONTHLY,
                lim.monthly,
                ask.spend,
                state.month.spend + state.month.reserved_spend,
            ),
        )
        for limit, value, needed, counted in checks:
            if value is None:
                continue
            if needed > value:
                return TooLarge(state.scope, limit, value, needed)
            if counted + needed > value:
                return Refused(state.scope, limit, value, retry_after(limit, now))
        if lim.rpm is not None:
            left = lim.rpm - state.minute.requests - 1
            remaining_requests = (
                left if remaining_requests is None else min(remaining_requests, left)
            )
        if lim.tpm is not None:
            left = lim.tpm - state.minute.tokens - state.minute.reserved_tokens - ask.tokens
            remaining_tokens = left if remaining_tokens is None else min(remaining_tokens, left)
    return Admitted(remaining_requests, remaining_tokens)


def settlement(
    ask: Ask, tokens: int, spend: int, *, answered: bool = True
) -> tuple[Counter, Counter]:
    """The deltas that replace a reservation by actual use: ``(minute, day-and-month)``.

    ``tokens`` and ``spend`` are what the provider reported (0 for a call that failed).
    A call no upstream ``answered`` (a 502, a 504, an upstream's refusal of the request)
    cost the team nothing, so it gives back the request its admission counted too: a team
    at its rpm limit whose call failed may make the next one (decision 177).
    """
    requests = 0 if answered else -1
    minute = Counter(requests=requests, tokens=tokens, reserved_tokens=-ask.tokens)
    money = Counter(requests=requests, spend=spend, reserved_spend=-ask.spend)
    return minute, money

"""The four limits of a tier (rpm, tpm, daily and monthly spend), enforced exactly at the
boundary, sequentially and under concurrency, through the official SDK over a real socket.

A call reserves ``R`` (its prompt estimate plus ``max_tokens``; the cost of both) and, when it
ends, counts ``A`` (the provider's usage).  So with a limit ``L`` and nothing used, ``L // R``
overlapping calls are admitted, and one after another calls go while ``used + R <= L``.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal

import openai
import pytest
from harness import Running, overlapping_calls

from onecluster.gateway import KeyLimits

pytestmark = pytest.mark.integration

HELLO = [{"role": "user", "content": "say hello to the whole team"}]
A_TOKENS = 9 + 4  # the fake's usage at max_tokens=4: 9 prompt, 4 completion
A_COST = 9 * 1_000 + 4 * 2_000  # nano-dollars at $1/M in, $2/M out
MINUTE_LEFT = 55  # the fixed clock is 10:00:05 UTC
DAY_LEFT = 14 * 3600 - 5


def reservation(running: Running) -> tuple[int, int]:
    """``R`` of one HELLO call with max_tokens=4: tokens and nano-dollars."""
    prompt = running.gateway.estimator.chat("o200k_base", HELLO)
    return prompt + 4, prompt * 1_000 + 4 * 2_000


def sequential_admissions(limit: int, reserve: int, actual: int) -> int:
    used = admitted = 0
    while used + reserve <= limit:
        used += actual
        admitted += 1
    return admitted


def call(client: openai.OpenAI, **extra: object) -> None:
    client.chat.completions.create(model="gpt-fake", messages=HELLO, max_tokens=4, **extra)


def outcomes(client: openai.OpenAI, n: int) -> list[str]:
    got = []
    for _ in range(n):
        try:
            call(client)
            got.append("ok")
        except openai.RateLimitError as exc:
            got.append(f"429:{exc.response.headers['retry-after']}")
    return got


def test_rpm_admits_exactly_the_tiers_requests_per_minute_under_concurrency(
    running: Running,
) -> None:
    key = running.key("interns")  # tier free: rpm 5
    got = asyncio.run(overlapping_calls([f"{running.url}/v1"], key, 12, delay_ms=400))
    assert got.count("ok") == 5 and got.count("429") == 7
    client = running.client(key)
    with pytest.raises(openai.RateLimitError) as refused:
        call(client)
    assert refused.value.response.headers["retry-after"] == str(MINUTE_LEFT)
    assert "rpm" in refused.value.message
    running.clock.advance(60)  # the next minute
    assert outcomes(client, 6) == ["ok"] * 5 + [f"429:{MINUTE_LEFT}"]


def test_tpm_boundary_is_inclusive_and_one_token_less_refuses(running: Running) -> None:
    r_tokens, _ = reservation(running)
    exact = 2 * A_TOKENS + r_tokens  # the third call lands exactly on the limit
    on_it = running.client(running.key("vision", KeyLimits(tpm=exact)))
    assert outcomes(on_it, 4) == ["ok", "ok", "ok", f"429:{MINUTE_LEFT}"]
    below = running.client(running.key("vision", KeyLimits(tpm=exact - 1)))
    assert outcomes(below, 3) == ["ok", "ok", f"429:{MINUTE_LEFT}"]


def test_tpm_under_concurrency_never_admits_more_than_fits(running: Running) -> None:
    r_tokens, _ = reservation(running)
    limit = 3 * r_tokens + r_tokens - 1  # room for three reservations, not four
    key = running.key("vision", KeyLimits(tpm=limit))
    got = asyncio.run(overlapping_calls([f"{running.url}/v1"], key, 10, delay_ms=400))
    assert got.count("ok") == 3
    # settled: three calls of A tokens are counted, the reservations are gone
    counter = running.store.counters(_key_scope(running, key), running.clock.now())["minute"]
    assert (counter.tokens, counter.reserved_tokens) == (3 * A_TOKENS, 0)
    more = sequential_admissions(limit - 3 * A_TOKENS, r_tokens, A_TOKENS)
    assert outcomes(running.client(key), more + 1) == ["ok"] * more + [f"429:{MINUTE_LEFT}"]


def test_the_tiers_own_tpm_is_enforced_under_concurrency(running: Running) -> None:
    # tier free: tpm 200; a call with max_tokens=64 reserves its prompt + 64
    prompt = running.gateway.estimator.chat("o200k_base", HELLO)
    client = running.async_client(running.key("interns"))

    async def one() -> str:
        try:
            await client.chat.completions.create(
                model="gpt-fake", messages=HELLO, max_tokens=64, extra_body={"fake_delay_ms": 400}
            )
        except openai.RateLimitError as exc:
            return "429 tpm" if "tpm" in exc.message else "429"
        return "ok"

    async def four() -> list[str]:
        try:
            return list(await asyncio.gather(*(one() for _ in range(4))))
        finally:
            await client.close()

    got = asyncio.run(four())
    assert got.count("ok") == 200 // (prompt + 64)
    assert got.count("429 tpm") == 4 - got.count("ok")


def test_a_call_no_window_could_hold_is_a_bad_request_not_a_rate_limit(
    running: Running,
) -> None:
    client = running.client(running.key("vision", KeyLimits(tpm=10)))
    with pytest.raises(openai.BadRequestError) as never:
        call(client)
    assert "no window will ever hold it" in never.value.message
    assert running.store.ledger_rows() == []


def test_daily_spend_is_exact_and_resets_at_utc_midnight(running: Running) -> None:
    _, r_cost = reservation(running)
    daily = Decimal(2 * A_COST + r_cost) / 1_000_000_000
    client = running.client(running.key("vision", KeyLimits(daily_spend=daily)))
    assert outcomes(client, 4) == ["ok", "ok", "ok", f"429:{DAY_LEFT}"]
    running.clock.advance(DAY_LEFT)  # midnight
    assert outcomes(client, 1) == ["ok"]


def test_monthly_spend_holds_across_days_and_resets_with_the_month(running: Running) -> None:
    _, r_cost = reservation(running)
    monthly = Decimal(2 * A_COST + r_cost) / 1_000_000_000
    client = running.client(running.key("vision", KeyLimits(monthly_spend=monthly)))
    assert outcomes(client, 3) == ["ok"] * 3
    running.clock.advance(86_400)  # the next day: still the same month
    with pytest.raises(openai.RateLimitError) as refused:
        call(client)
    assert "monthly_spend" in refused.value.message
    running.clock.set(1_798_761_600.0)  # 2027-01-01 00:00 UTC
    assert outcomes(client, 1) == ["ok"]


def test_the_tiers_spend_limits_cap_the_team_as_a_whole(running: Running) -> None:
    # tier capped: $0.002 a day, $0.005 a month; two keys of one team share it
    _, r_cost = reservation(running)
    first = running.client(running.key("research"))
    second = running.client(running.key("research"))
    expected = sequential_admissions(2_000_000, r_cost, A_COST)
    got = [outcomes(c, 1)[0] for _ in range(expected + 1) for c in (first, second)]
    assert got.count("ok") == expected
    assert got[expected] == f"429:{DAY_LEFT}"
    running.clock.advance(DAY_LEFT)
    assert sequential_admissions(5_000_000 - expected * A_COST, r_cost, A_COST) > 0
    assert outcomes(first, 1) == ["ok"]


def test_a_zero_spend_limit_admits_nothing_that_costs(running: Running) -> None:
    client = running.client(running.key("vision", KeyLimits(daily_spend=Decimal(0))))
    with pytest.raises(openai.BadRequestError):
        call(client)


def _key_scope(running: Running, secret: str) -> str:
    (record,) = [k for k in running.store.team_keys() if secret.startswith(f"ocg_{k.key_id}_")]
    return f"key:{record.key_id}"


@pytest.mark.parametrize("limit", ["daily_spend", "monthly_spend"])
def test_spend_limits_under_concurrency_never_admit_more_than_fits(
    running: Running, limit: str
) -> None:
    _, r_cost = reservation(running)
    room = Decimal(4 * r_cost - 1) / 1_000_000_000  # three reservations fit, not four
    key = running.key("vision", KeyLimits(**{limit: room}))
    got = asyncio.run(overlapping_calls([f"{running.url}/v1"], key, 10, delay_ms=400))
    assert got.count("ok") == 3
    spent = running.store.counters(_key_scope(running, key), running.clock.now())
    period = "day" if limit == "daily_spend" else "month"
    assert (spent[period].spend, spent[period].reserved_spend) == (3 * A_COST, 0)


def test_streamed_calls_are_held_to_the_same_boundary(running: Running) -> None:
    r_tokens, _ = reservation(running)
    exact = 2 * A_TOKENS + r_tokens
    client = running.client(running.key("vision", KeyLimits(tpm=exact)))
    got = []
    for _ in range(4):
        try:
            chunks = list(
                client.chat.completions.create(
                    model="gpt-fake", messages=HELLO, max_tokens=4, stream=True
                )
            )
            got.append("".join(c.choices[0].delta.content or "" for c in chunks if c.choices))
        except openai.RateLimitError:
            got.append("429")
    assert got == ["hello " * 4] * 3 + ["429"]
    rows = running.store.ledger_rows()
    assert sum(int(r["prompt_tokens"]) + int(r["completion_tokens"]) for r in rows) == 3 * A_TOKENS

"""What a call that fails upstream costs the team's limits: nothing at all, its
requests-per-minute slot included (decision 177); a stream cut mid-way got part of an answer
and counts like an answered call (docs/gateway.md, "Errors")."""

from __future__ import annotations

import openai
import pytest
from harness import Running

from onecluster.gateway import KeyLimits

pytestmark = pytest.mark.integration

HELLO = [{"role": "user", "content": "say hello to the whole team"}]


def ask(client: openai.OpenAI, model: str) -> None:
    client.chat.completions.create(model=model, messages=HELLO, max_tokens=4)  # type: ignore[arg-type]


def requests_counted(running: Running, scope: str) -> dict[str, int]:
    counters = running.store.counters(scope, running.clock.now())
    return {period.value: counter.requests for period, counter in counters.items()}


@pytest.mark.parametrize(("model", "status"), [("gpt-badkey", 502), ("gpt-hang", 504)])
def test_a_call_that_fails_upstream_gives_its_rpm_slot_back(
    running: Running, model: str, status: int
) -> None:
    key = running.key("vision", KeyLimits(rpm=1))
    client = running.client(key)
    with pytest.raises(openai.InternalServerError) as failed:
        ask(client, model)
    assert failed.value.status_code == status
    (key_id,) = {r.key_id for r in running.store.team_keys("vision")}
    assert requests_counted(running, f"key:{key_id}") == {"minute": 0, "day": 0, "month": 0}
    ask(client, "gpt-fake")  # the key's one request of the minute is still there
    with pytest.raises(openai.RateLimitError):
        ask(client, "gpt-fake")  # and now it is used


def test_a_stream_cut_mid_way_keeps_its_rpm_slot(running: Running) -> None:
    client = running.client(running.key("vision", KeyLimits(rpm=1)))
    with pytest.raises(openai.APIError):
        for _ in client.chat.completions.create(model="gpt-cut", messages=HELLO, stream=True):  # type: ignore[arg-type]
            pass
    with pytest.raises(openai.RateLimitError):
        ask(client, "gpt-fake")  # the cut stream was answered in part, and billed for it

"""Two ``onecluster gateway serve`` processes on one database, in front of the **fake**
upstream (``onecluster gateway fake-upstream``), set up through the CLI as an admin would:
a limit is shared, not multiplied by the number of processes; revocation reaches both; the
month's bill (``onecluster report llm``) is the sum of the usage the upstream reported."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from functools import partial
from typing import Any

import openai
import pytest
from harness import PROVIDER_KEYS, Fleet, overlapping_calls, wait_until

pytestmark = pytest.mark.integration

HELLO = [{"role": "user", "content": "say hello to the whole team"}]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Fleet, list[str]]]:
    tmp_path = tmp_path_factory.mktemp("fleet")
    fleet = Fleet(tmp_path)
    try:
        fleet.start_upstream()
        urls = []
        for i in range(2):
            port = fleet.start(
                "--state-dir",
                str(tmp_path),
                "gateway",
                "serve",
                "--config",
                str(fleet.config),
                name=f"gw{i}",
            )
            urls.append(f"http://127.0.0.1:{port}/v1")
        yield fleet, urls
    finally:
        fleet.stop()
    for i in range(2):
        log = (tmp_path / f"gw{i}.log").read_text()
        assert all(secret not in log for secret in PROVIDER_KEYS.values())


def _issue(fleet: Fleet, team: str, *extra: str) -> str:
    out = fleet.cli(
        "gateway", "keys", "issue", "--config", str(fleet.config), "--team", team, *extra
    )
    return out.strip()


def _in_one_minute(batch: Callable[[], list[str]]) -> list[str]:
    """What ``batch()`` got, from a run that began and ended in one UTC minute.

    The processes count per-minute limits on the real clock: a run that straddles a minute's
    end is split over two windows, so it is run again once the next minute has begun (a
    window no call has touched yet).
    """
    while True:
        began = time.time() // 60
        got = batch()
        ended = time.time() // 60
        if ended == began:
            return got
        # The run touched this window too: wait it out.
        wait_until(lambda e=ended: time.time() // 60 > e, "the next minute", timeout=61)


def test_a_limit_is_shared_by_every_process_not_multiplied(fleet: tuple[Fleet, list[str]]) -> None:
    admin, urls = fleet
    key = _issue(admin, "interns")  # tier free: 5 requests a minute
    got = _in_one_minute(lambda: asyncio.run(overlapping_calls(urls, key, 16, delay_ms=300)))
    assert got.count("ok") == 5
    tight = _issue(admin, "vision", "--rpm", "7")  # a key's own, stricter limit
    got = _in_one_minute(lambda: asyncio.run(overlapping_calls(urls, tight, 16, delay_ms=300)))
    assert got.count("ok") == 7


def test_revoking_a_key_stops_it_on_every_process(fleet: tuple[Fleet, list[str]]) -> None:
    admin, urls = fleet
    key = _issue(admin, "vision")
    clients = [openai.OpenAI(base_url=u, api_key=key, max_retries=0) for u in urls]
    for c in clients:
        c.chat.completions.create(model="gpt-fake", messages=HELLO)
    listed = admin.cli("gateway", "keys", "list", "--team", "vision")
    key_id = key.split("_")[1]
    assert key_id in listed and key not in listed
    admin.cli("gateway", "keys", "revoke", key_id)
    for c in clients:  # each process refuses it once its key cache is refreshed (every 1 s)
        wait_until(partial(_refused, c), "the revoked key refused")
        c.close()


def _refused(client: openai.OpenAI) -> bool:
    try:
        client.chat.completions.create(model="gpt-fake", messages=HELLO)
    except openai.AuthenticationError as exc:
        assert "revoked" in exc.message
        return True
    return False


def test_the_monthly_bill_is_the_sum_of_the_upstreams_usage(
    fleet: tuple[Fleet, list[str]],
) -> None:
    admin, urls = fleet
    keys = {team: _issue(admin, team) for team in ("speech", "legal", "research")}
    began = time.strftime("%Y-%m", time.gmtime())
    reported: dict[str, list[int]] = {team: [0, 0] for team in keys}
    clients: list[openai.OpenAI] = []
    for i in range(24):
        team = list(keys)[i % 3]
        client = openai.OpenAI(base_url=urls[i % 2], api_key=keys[team], max_retries=0)
        clients.append(client)
        if i % 4 == 0:
            stream = client.chat.completions.create(
                model="gpt-fake",
                messages=HELLO,
                stream=True,
                max_tokens=1 + i % 8,
                stream_options={"include_usage": True},
            )
            usage = next(c.usage for c in stream if c.usage)
        else:
            usage = client.chat.completions.create(
                model="gpt-fake",
                messages=[{"role": "user", "content": "word " * i}],
                max_tokens=1 + i % 8,
            ).usage
        assert usage is not None
        reported[team][0] += usage.prompt_tokens
        reported[team][1] += usage.completion_tokens
    for client in clients:
        client.close()
    # The processes bill on the real clock: calls that straddled a month's end are in two bills.
    months = sorted({began, time.strftime("%Y-%m", time.gmtime())})
    lines = _bill_lines(admin, months)
    assert set(keys) <= set(lines)  # the other tests of this module billed other teams
    for team, (prompt, completion) in reported.items():
        line = lines[team]
        assert (line["prompt_tokens"], line["completion_tokens"]) == (prompt, completion)
        assert line["calls"] == 8 and line["estimated_calls"] == 0
        # $1/M prompt, $2/M completion: cost is exact to the nano-dollar
        assert line["cost"] == Decimal(prompt * 1 + completion * 2) / 1_000_000
    table = admin.cli("report", "llm", "--month", months[-1])
    assert "total:" in table


_SUMMED = ("calls", "estimated_calls", "prompt_tokens", "completion_tokens", "cost")


def _bill_lines(admin: Fleet, months: list[str]) -> dict[str, dict[str, Any]]:
    """Each team's line of ``report llm``, summed over ``months`` (the cost as a Decimal)."""
    lines: dict[str, dict[str, Any]] = {}
    for month in months:
        bill = json.loads(admin.cli("report", "llm", "--month", month, "--format", "json"))
        for line in bill["lines"]:
            line["cost"] = Decimal(line["cost"])
            seen = lines.setdefault(line["team"], dict.fromkeys(_SUMMED, 0))
            for name in _SUMMED:
                seen[name] += line[name]
    return lines

"""The gateway on PostgreSQL (``ONECLUSTER_TEST_PG_URL``, started by scripts/postgres.sh):
two gateways on one database share a team's limits exactly, as processes on different hosts
would; boundaries, the ledger and the bill behave as on SQLite."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator

import openai
import pytest
from harness import Running, ServerThread, gateway_yaml, overlapping_calls

from onecluster.gateway import FakeUpstream, GatewayStore, KeyLimits

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

HELLO = [{"role": "user", "content": "say hello to the whole team"}]
SCHEMA = "gateway_tests"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """The project's PostgreSQL, in a schema of the gateway tests' own (the server's tests
    compare the public schema with their migrations and must not see gateway tables)."""
    url = os.environ.get("ONECLUSTER_TEST_PG_URL")
    if not url:
        pytest.skip("ONECLUSTER_TEST_PG_URL is not set; start one with scripts/postgres.sh")
    import psycopg

    plain = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as db:
        db.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        db.execute(f"CREATE SCHEMA {SCHEMA}")
    yield plain + ("&" if "?" in plain else "?") + f"options=-csearch_path%3D{SCHEMA}"
    with psycopg.connect(plain, autocommit=True) as db:
        db.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


def test_two_gateways_on_one_postgres_share_a_limit(
    make_gateway: Callable[..., Running],
    fake: tuple[ServerThread, FakeUpstream],
    pg_url: str,
) -> None:
    first = make_gateway(gateway_yaml(fake[0].url), pg_url)
    second = make_gateway(gateway_yaml(fake[0].url), pg_url)
    urls = [f"{first.url}/v1", f"{second.url}/v1"]
    key = first.key("interns")  # tier free: 5 a minute; issued through one, valid on both
    got = asyncio.run(overlapping_calls(urls, key, 14, delay_ms=300))
    assert got.count("ok") == 5
    tight = first.key("vision", KeyLimits(rpm=3))
    assert asyncio.run(overlapping_calls(urls, tight, 9, delay_ms=300)).count("ok") == 3
    assert len(first.store.ledger_rows()) == 8


def test_boundaries_the_ledger_and_the_bill_on_postgres(
    make_gateway: Callable[..., Running],
    fake: tuple[ServerThread, FakeUpstream],
    pg_url: str,
) -> None:
    running = make_gateway(gateway_yaml(fake[0].url), pg_url)
    prompt = running.gateway.estimator.chat("o200k_base", HELLO)
    limit = 2 * 13 + prompt + 4  # the third call lands exactly on the limit
    client = running.client(running.key("vision", KeyLimits(tpm=limit)))
    got = []
    for _ in range(4):
        try:
            client.chat.completions.create(model="gpt-fake", messages=HELLO, max_tokens=4)
            got.append("ok")
        except openai.RateLimitError:
            got.append("429")
    assert got == ["ok", "ok", "ok", "429"]
    with pytest.raises(openai.RateLimitError):  # a stream over the limit: refused up front
        client.chat.completions.create(model="gpt-fake", messages=HELLO, stream=True, max_tokens=1)
    (line,) = running.store.bill(running.store.ledger_rows()[0]["month"])  # type: ignore[arg-type]
    assert (line.team, line.calls, line.prompt_tokens, line.completion_tokens) == (
        "vision",
        3,
        27,
        12,
    )
    assert line.cost == 27 * 1_000 + 12 * 2_000
    assert [k.team for k in running.store.team_keys("vision")] == ["vision"]
    assert len(running.store.audit_rows()) == 5  # three answered, two refused
    assert isinstance(running.store, GatewayStore) and running.store.blocking

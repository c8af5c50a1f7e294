"""The gateway on PostgreSQL (``ONECLUSTER_TEST_PG_URL``, started by scripts/postgres.sh):
two gateways on one database share a team's limits exactly, as processes on different hosts
would; boundaries, the ledger and the bill behave as on SQLite; a refusal is audited before
the client sees it.  The gateways run on the fixed clock of ``harness`` (T0), so no window
turns over mid-test whatever the wall clock says."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterator

import httpx
import openai
import pytest
from harness import T0, Running, ServerThread, gateway_yaml, overlapping_calls, wait_until

from onecluster.gateway import FakeUpstream, GatewayStore, KeyLimits
from onecluster.gateway._sql import connect

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

HELLO = [{"role": "user", "content": "say hello to the whole team"}]
# One schema per test process: two suites on one PostgreSQL (two checkouts, say) must not
# drop each other's tables mid-test.
SCHEMA = f"gateway_tests_{os.getpid()}"


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
    assert {row["at"] for row in running.store.ledger_rows()} == {T0}  # the injected clock
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


def test_a_refusal_is_in_the_audit_before_the_client_sees_it(
    make_gateway: Callable[..., Running],
    fake: tuple[ServerThread, FakeUpstream],
    pg_url: str,
) -> None:
    running = make_gateway(gateway_yaml(fake[0].url), pg_url)
    key = running.key("vision")
    answered: list[int] = []

    def refused_call() -> None:
        reply = httpx.post(
            f"{running.url}/v1/chat/completions",
            json={"model": "no-such-model", "messages": HELLO},
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )
        answered.append(reply.status_code)

    caller = threading.Thread(target=refused_call)
    holder = connect(pg_url)
    try:
        with holder.write():  # the gateways' write lock: the refusal's audit row must wait
            caller.start()
            wait_until(
                lambda: holder.execute(
                    "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                ).fetchone(),
                "the gateway waiting for the lock to write the audit row",
            )
            # A later request answered: the gateway has gone on past the refused call.
            assert httpx.get(f"{running.url}/healthz", timeout=30).status_code == 200
            assert answered == []  # the 404 waits for its audit row
        caller.join(30)
    finally:
        holder.close()
    assert answered == [404]
    (row,) = running.store.audit_rows()
    assert (row["outcome"], row["http_status"]) == ("not_found", 404)

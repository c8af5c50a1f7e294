"""Bad input gets the status the SDK maps to the right exception, and changes nothing; failing
upstreams cost nothing; provider keys never leave the gateway."""

from __future__ import annotations

import logging
import time

import httpx
import openai
import pytest
from harness import PROVIDER_KEYS, T0, Running, wait_until

from onecluster.gateway import KeyLimits

pytestmark = pytest.mark.integration

HELLO = [{"role": "user", "content": "say hello to the whole team"}]


def ask(client: openai.OpenAI, model: str = "gpt-fake", **extra: object) -> object:
    return client.chat.completions.create(model=model, messages=HELLO, **extra)


def nothing_billed(running: Running) -> None:
    assert all(r["cost"] == 0 for r in running.store.ledger_rows())
    for team in ("vision", "speech", "interns"):
        for counter in running.store.counters(f"team:{team}", running.clock.now()).values():
            assert (counter.tokens, counter.spend) == (0, 0)
            assert (counter.reserved_tokens, counter.reserved_spend) == (0, 0)


def test_missing_unknown_and_revoked_keys_are_401(running: Running) -> None:
    with pytest.raises(openai.AuthenticationError):
        ask(running.client("ocg_000000000000_not-a-real-secret"))
    with pytest.raises(openai.AuthenticationError):
        ask(running.client("sk-whatever"))
    reply = httpx.post(f"{running.url}/v1/chat/completions", json={"model": "gpt-fake"})
    assert reply.status_code == 401
    assert reply.json()["error"]["type"] == "authentication_error"
    key = running.key("vision")
    ask(running.client(key))
    (record,) = running.store.team_keys("vision")
    running.store.revoke_key(record.key_id, T0 + 1)
    running.server.call(running.gateway.keys.refresh)  # what the 1 s refresh does
    with pytest.raises(openai.AuthenticationError) as revoked:
        ask(running.client(key))
    assert "revoked" in revoked.value.message
    assert len(running.store.ledger_rows()) == 1


def test_a_model_off_the_tier_is_403_and_an_unknown_model_404(running: Running) -> None:
    client = running.client(running.key("interns"))
    with pytest.raises(openai.PermissionDeniedError):
        ask(client, model="gpt-fallback")
    with pytest.raises(openai.NotFoundError):
        ask(client, model="no-such-model")
    narrow = running.client(running.key("vision", KeyLimits(models=("gpt-cut",))))
    with pytest.raises(openai.PermissionDeniedError):
        ask(narrow)
    with pytest.raises(openai.BadRequestError):  # a completion model on the chat endpoint
        ask(running.client(running.key("speech")), model="qwen-fake")
    assert running.fake.calls.total() == 0
    nothing_billed(running)
    refusals = [r["outcome"] for r in running.store.audit_rows()]
    assert refusals.count("forbidden") == 2


def test_malformed_bodies_are_400(running: Running) -> None:
    key = running.key("vision")
    headers = {"Authorization": f"Bearer {key}"}
    url = f"{running.url}/v1/chat/completions"
    for body in (b"{not json", b"[1, 2]", b'{"messages": []}', b'{"model": "gpt-fake"}'):
        reply = httpx.post(url, content=body, headers=headers)
        assert reply.status_code == 400, body
        assert reply.json()["error"]["code"] == "invalid"
    with pytest.raises(openai.BadRequestError):
        ask(running.client(key), max_tokens=-3)
    assert httpx.get(f"{running.url}/v2/nothing", headers=headers).status_code == 404
    assert running.fake.calls.total() == 0
    nothing_billed(running)


def test_an_upstream_that_fails_is_a_502_and_costs_nothing(running: Running) -> None:
    client = running.client(running.key("vision"))
    with pytest.raises(openai.InternalServerError) as failed:
        ask(client, model="gpt-badkey")
    assert failed.value.status_code == 502
    assert running.store.ledger_rows() == []  # nothing answered: an audit row only
    (row,) = running.store.audit_rows()
    assert (row["outcome"], row["http_status"], row["attempts"]) == ("upstream_failed", 502, 1)
    nothing_billed(running)


def test_an_upstream_that_hangs_is_a_504_after_its_timeout(running: Running) -> None:
    client = running.client(running.key("vision"))
    started = time.monotonic()
    with pytest.raises(openai.InternalServerError) as hung:
        ask(client, model="gpt-hang")
    assert hung.value.status_code == 504
    assert time.monotonic() - started < 5
    nothing_billed(running)


def test_fallback_goes_to_the_next_deployment_before_the_first_byte(running: Running) -> None:
    client = running.client(running.key("vision"))
    raw = client.chat.completions.with_raw_response.create(model="gpt-fallback", messages=HELLO)
    assert raw.parse().choices[0].message.content == "hello " * 8
    assert raw.headers["x-onecluster-upstream"] == "azure-tokyo"
    assert raw.headers["x-onecluster-egress"] == "tokyo-egress"
    stream = client.chat.completions.create(model="gpt-fallback", messages=HELLO, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    rows = running.store.ledger_rows()
    assert [(r["upstream"], r["egress"], r["completion_tokens"]) for r in rows] == [
        ("azure-tokyo", "tokyo-egress", 8),
        ("azure-tokyo", "tokyo-egress", 8),
    ]
    audit = running.store.audit_rows(rows[0]["request_id"])  # type: ignore[arg-type]
    assert audit[0]["attempts"] == 2  # the failing one and azure (keyless has no key)
    assert running.fake.auth_headers[PROVIDER_KEYS["azure-tokyo"]] == 2  # its api-key header


def test_provider_keys_never_reach_a_response_a_log_or_the_audit(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    key = running.key("legal")  # a team whose prompts and answers are audited
    seen: list[str] = []
    for model in ("gpt-badkey", "gpt-fake", "gpt-fallback"):
        reply = httpx.post(
            f"{running.url}/v1/chat/completions",
            json={"model": model, "messages": HELLO},
            headers={"Authorization": f"Bearer {key}"},
        )
        seen.append(reply.text + str(reply.headers))
    reply = httpx.get(f"{running.url}/metrics")
    seen.append(reply.text)
    assert "Incorrect API key provided: Bearer [redacted key]" in seen[0]
    seen.append(str(running.store.audit_rows()) + str(running.store.ledger_rows()))
    seen.append(caplog.text)
    for secret in PROVIDER_KEYS.values():
        assert all(secret not in text for text in seen)
    # and the team's key never reached the upstream
    assert all(key not in header for header in running.fake.auth_headers)


def test_a_retry_with_the_same_idempotency_key_is_not_billed_twice(running: Running) -> None:
    client = running.client(running.key("vision"))
    ask(client, extra_headers={"Idempotency-Key": "job-42-step-7"})
    with pytest.raises(openai.ConflictError):
        ask(client, extra_headers={"Idempotency-Key": "job-42-step-7"})
    assert running.fake.calls.total() == 1
    assert len(running.store.ledger_rows()) == 1


def test_a_client_that_disconnects_mid_stream_is_billed_for_what_was_generated_once(
    running: Running,
) -> None:
    key = running.key("vision")
    body = {"model": "gpt-fake", "messages": HELLO, "stream": True, "fake_gap_ms": 150}
    with (
        httpx.Client() as http,
        http.stream(
            "POST",
            f"{running.url}/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {key}"},
        ) as reply,
    ):
        for line in reply.iter_lines():
            if "hello" in line:
                break  # one token read, then the client goes away
    wait_until(running.store.ledger_rows, "the disconnected stream billed")
    # A later call answered on the same gateway: whatever the stream's handler still had to
    # do (a second settlement, say) it has done by now.
    ask(running.client(running.key("speech")), max_tokens=1)
    (row,) = [r for r in running.store.ledger_rows() if r["team"] == "vision"]
    assert len(running.store.audit_rows(row["request_id"])) == 1  # type: ignore[arg-type]
    assert row["outcome"] == "client_disconnected"
    assert row["estimated"] == 1
    assert 1 <= row["completion_tokens"] < 8
    assert row["cost"] > 0
    team = running.store.counters("team:vision", running.clock.now())
    assert team["minute"].reserved_tokens == 0
    assert team["month"].spend == row["cost"]


def test_a_stream_the_upstream_cuts_ends_with_an_error_and_bills_what_came(
    running: Running,
) -> None:
    client = running.client(running.key("vision"))
    got = []
    with pytest.raises(openai.APIError):
        for chunk in client.chat.completions.create(model="gpt-cut", messages=HELLO, stream=True):
            got.extend(c.delta.content or "" for c in chunk.choices)
    assert "".join(got) == "hello " * 3
    (row,) = running.store.ledger_rows()
    assert (row["outcome"], row["estimated"]) == ("upstream_cut", 1)
    assert row["completion_tokens"] == running.gateway.estimator.count("o200k_base", "hello " * 3)


def test_a_malformed_event_is_dropped_and_the_stream_completes(running: Running) -> None:
    client = running.client(running.key("vision"))
    chunks = list(
        client.chat.completions.create(
            model="gpt-malformed",
            messages=HELLO,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "hello " * 8
    (row,) = running.store.ledger_rows()
    assert (row["outcome"], row["completion_tokens"], row["estimated"]) == ("ok", 8, 0)


def test_an_upstream_redirect_is_a_failure_not_followed(running: Running) -> None:
    with pytest.raises(openai.InternalServerError) as failed:
        ask(running.client(running.key("vision")), model="gpt-redirect")
    assert failed.value.status_code == 502 and "307" in failed.value.message
    nothing_billed(running)


def test_a_failed_call_may_be_retried_with_its_idempotency_key(running: Running) -> None:
    client = running.client(running.key("vision"))
    for _ in range(2):  # not billed, so not a duplicate
        with pytest.raises(openai.InternalServerError):
            ask(client, model="gpt-badkey", extra_headers={"Idempotency-Key": "retry-me"})
    assert running.fake.calls["fake-fail-401"] == 2


def test_any_bytes_in_an_idempotency_key_are_safe(running: Running) -> None:
    key = running.key("vision")
    headers = [("Authorization", f"Bearer {key}".encode()), ("Idempotency-Key", b"abc\xff")]
    body = {"model": "gpt-fake", "messages": HELLO}
    url = f"{running.url}/v1/chat/completions"
    assert httpx.post(url, json=body, headers=headers).status_code == 200
    assert httpx.post(url, json=body, headers=headers).status_code == 409
    assert len(running.store.ledger_rows()) == 1

"""The official ``openai`` SDK, over a real socket, through the gateway to the fake upstream:
plain and streamed calls, completions, embeddings, the model list, and what is billed."""

from __future__ import annotations

import pytest
from harness import PROVIDER_KEYS, Running

pytestmark = pytest.mark.integration

HELLO = [{"role": "user", "content": "say hello to the whole team"}]  # 6 words: 9 fake tokens


def test_a_plain_chat_call_is_answered_and_billed_from_the_providers_usage(
    running: Running,
) -> None:
    client = running.client(running.key("vision"))
    raw = client.chat.completions.with_raw_response.create(model="gpt-fake", messages=HELLO)
    reply = raw.parse()
    assert reply.choices[0].message.content == "hello " * 8
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (9, 8)
    assert raw.headers["x-onecluster-egress"] == "sg-egress"
    assert float(raw.headers["x-onecluster-overhead-ms"]) > 0
    # 9 prompt tokens at $1/M and 8 completion tokens at $2/M
    assert raw.headers["x-onecluster-cost"] == "0.000025000"
    (row,) = running.store.ledger_rows()
    assert row["team"] == "vision"
    assert (row["prompt_tokens"], row["completion_tokens"], row["cost"]) == (9, 8, 25_000)
    assert row["estimated"] == 0
    assert row["request_id"] == raw.headers["x-request-id"]
    # the upstream saw the provider's key only, and the deployment's model name
    assert set(running.fake.auth_headers) == {f"Bearer {PROVIDER_KEYS['openai-sg']}"}
    assert running.fake.bodies[-1]["model"] == "fake-gpt"


def test_a_streamed_call_arrives_in_chunks_with_usage_when_asked(running: Running) -> None:
    client = running.client(running.key("vision"))
    stream = client.chat.completions.create(
        model="gpt-fake",
        messages=HELLO,
        stream=True,
        stream_options={"include_usage": True},
        max_tokens=5,
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "hello " * 5
    usage = chunks[-1].usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (9, 5)
    (row,) = running.store.ledger_rows()
    assert (row["prompt_tokens"], row["completion_tokens"]) == (9, 5)


def test_a_stream_that_did_not_ask_for_usage_is_still_billed_but_not_shown_it(
    running: Running,
) -> None:
    client = running.client(running.key("vision"))
    chunks = list(client.chat.completions.create(model="gpt-fake", messages=HELLO, stream=True))
    assert all(c.usage is None for c in chunks)
    assert running.fake.bodies[-1]["stream_options"] == {"include_usage": True}
    (row,) = running.store.ledger_rows()
    assert (row["prompt_tokens"], row["completion_tokens"], row["estimated"]) == (9, 8, 0)


def test_completions_and_embeddings_pass_through(running: Running) -> None:
    client = running.client(running.key("speech"))
    done = client.completions.create(model="qwen-fake", prompt="one two three", max_tokens=2)
    assert done.choices[0].text == "hello hello "
    streamed = list(
        client.completions.create(model="qwen-fake", prompt="one two", stream=True, max_tokens=3)
    )
    assert "".join(c.choices[0].text for c in streamed if c.choices) == "hello " * 3
    emb = client.embeddings.create(model="embed-fake", input=["a b", "c"])
    assert len(emb.data) == 2
    rows = running.store.ledger_rows()
    assert [(r["model"], r["prompt_tokens"], r["completion_tokens"]) for r in rows] == [
        ("qwen-fake", 6, 2),
        ("qwen-fake", 5, 3),
        ("embed-fake", 6, 0),
    ]


def test_the_model_list_is_the_tiers_allow_list(running: Running) -> None:
    names = {m.id for m in running.client(running.key("speech")).models.list()}
    assert names == {"gpt-fake", "qwen-fake", "embed-fake"}
    names = {m.id for m in running.client(running.key("interns")).models.list()}
    assert names == {"gpt-fake"}


def test_concurrent_async_calls_are_each_billed_once(running: Running) -> None:
    import asyncio

    client = running.async_client(running.key("vision"))

    async def many() -> list[int]:
        replies = await asyncio.gather(
            *(client.chat.completions.create(model="gpt-fake", messages=HELLO) for _ in range(40))
        )
        await client.close()
        return [r.usage.completion_tokens for r in replies if r.usage]

    assert asyncio.run(many()) == [8] * 40
    rows = running.store.ledger_rows()
    assert len(rows) == 40
    assert len({r["request_id"] for r in rows}) == 40

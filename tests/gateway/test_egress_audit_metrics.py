"""Regional egress (a real forward proxy at the Tokyo node), the audit of a team whose
policy keeps prompts (PII redacted), and the Prometheus metrics."""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Callable, Iterator

import aiohttp
import httpx
import openai
import pytest
from aiohttp import web
from harness import Running, ServerThread, gateway_yaml

from onecluster.gateway import FakeUpstream

pytestmark = pytest.mark.integration

HELLO = [{"role": "user", "content": "say hello to the whole team"}]
_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "host"}


def forward_proxy(seen: Counter[str]) -> web.Application:
    """An HTTP forward proxy (absolute-form requests), streaming answers through."""

    async def forward(request: web.Request) -> web.StreamResponse:
        seen[request.url.host or "?"] += 1
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        async with (
            aiohttp.ClientSession(auto_decompress=False) as session,
            session.request(
                request.method, str(request.url), headers=headers, data=await request.read()
            ) as upstream,
        ):
            out = web.StreamResponse(status=upstream.status)
            out.content_type = upstream.content_type
            await out.prepare(request)
            async for chunk in upstream.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    return app


@pytest.fixture
def proxied(
    make_gateway: Callable[[str], Running], fake: tuple[ServerThread, FakeUpstream]
) -> Iterator[tuple[Running, Counter[str]]]:
    seen: Counter[str] = Counter()
    proxy = ServerThread(lambda: forward_proxy(seen)).start()
    yield make_gateway(gateway_yaml(fake[0].url, tokyo_proxy=proxy.url)), seen
    proxy.stop()


def test_a_model_served_through_tokyo_leaves_through_tokyos_proxy(
    proxied: tuple[Running, Counter[str]],
) -> None:
    running, through_tokyo = proxied
    client = running.client(running.key("vision"))
    client.chat.completions.create(model="gpt-fake", messages=HELLO)  # Singapore, direct
    assert through_tokyo.total() == 0
    raw = client.chat.completions.with_raw_response.create(model="gpt-fallback", messages=HELLO)
    assert raw.headers["x-onecluster-egress"] == "tokyo-egress"
    stream = client.chat.completions.create(model="gpt-fallback", messages=HELLO, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "hello " * 8
    assert through_tokyo.total() == 2
    rows = running.store.audit_rows()
    assert [r["egress"] for r in rows] == ["sg-egress", "tokyo-egress", "tokyo-egress"]
    assert {r["region"] for r in rows} == {"us"}


def test_a_team_whose_policy_keeps_prompts_gets_them_redacted_others_get_none(
    running: Running,
) -> None:
    pii = [{"role": "user", "content": "mail li.wei@example.cn or call 13812345678"}]
    running.client(running.key("legal")).chat.completions.create(model="gpt-fake", messages=pii)
    running.client(running.key("vision")).chat.completions.create(model="gpt-fake", messages=pii)
    legal, vision = running.store.audit_rows()
    assert legal["team"] == "legal"
    assert "[EMAIL]" in str(legal["prompt"]) and "[PHONE]" in str(legal["prompt"])
    assert "li.wei" not in str(legal["prompt"]) and "13812345678" not in str(legal["prompt"])
    assert legal["response"] == "hello " * 8
    assert (vision["prompt"], vision["response"]) == (None, None)
    for row in (legal, vision):
        assert row["key_id"] and row["model"] == "gpt-fake" and row["http_status"] == 200
        assert row["prompt_tokens"] == 8 and row["cost"] == 8 * 1_000 + 8 * 2_000
        assert float(row["latency_ms"]) >= float(row["overhead_ms"]) > 0  # type: ignore[arg-type]


def test_metrics_count_calls_tokens_cost_and_refusals(running: Running) -> None:
    client = running.client(running.key("interns"))
    for _ in range(6):  # the sixth is over the tier's rpm
        with contextlib.suppress(openai.RateLimitError):
            client.chat.completions.create(model="gpt-fake", messages=HELLO)
    text = httpx.get(f"{running.url}/metrics").text

    def value(name: str) -> float:
        match = re.search(rf"^{re.escape(name)} ([\d.e+-]+)$", text, re.MULTILINE)
        assert match, name
        return float(match.group(1))

    # the exposition lists labels in alphabetical order
    assert (
        value('onecluster_gateway_calls_total{model="gpt-fake",outcome="ok",team="interns"}') == 5
    )
    tokens = 'onecluster_gateway_tokens_total{kind="completion",model="gpt-fake",team="interns"}'
    assert value(tokens) == 40
    assert value('onecluster_gateway_refusals_total{reason="rate_limited"}') == 1
    assert value('onecluster_gateway_cost_total{team="interns"}') == pytest.approx(5 * 25e-6)
    assert value("onecluster_gateway_overhead_seconds_count") == 5

"""A real ``onecluster gateway serve --log-format json`` in front of the **fake** upstream
(both started through the CLI): a call that fails upstream (502), one that times out (504)
and a stream cut mid-way each write one WARNING line a NOC can act on — request id, team,
model, upstream, status, elapsed time, and for the stream the chunks that went through —
and never a key or a prompt.  The client's ``X-Request-ID`` comes back, and is the line's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from harness import PROVIDER_KEYS, Fleet, gateway_yaml, wait_until

pytestmark = pytest.mark.integration

PROMPT = "the secret plans for the Tokyo launch"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Fleet, str, str]]:
    """The fleet, the gateway's base URL and a team key of ``vision``."""
    base = tmp_path_factory.mktemp("logs")
    fleet = Fleet(base)
    try:
        fleet.start_upstream()
        team_key = fleet.cli(
            "gateway", "keys", "issue", "--config", str(fleet.config), "--team", "vision"
        ).strip()
        port = fleet.start(
            "--state-dir", str(base), "gateway", "serve", "--config", str(fleet.config),
            "--log-format", "json", name="gw",
        )  # fmt: skip
        yield fleet, f"http://127.0.0.1:{port}", team_key
    finally:
        fleet.stop()


def json_lines(fleet: Fleet) -> list[dict[str, object]]:
    text = (fleet.base / "gw.log").read_text()
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def line_of(fleet: Fleet, request_id: str) -> dict[str, object]:
    """The one log line of ``request_id``, once it is written."""
    wait_until(
        lambda: any(line.get("request_id") == request_id for line in json_lines(fleet)),
        f"the log line of {request_id}",
    )
    (line,) = [line for line in json_lines(fleet) if line.get("request_id") == request_id]
    return line


def call(url: str, key: str, request_id: str, model: str, **body: object) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {key}", "X-Request-ID": request_id},
        json={"model": model, "messages": [{"role": "user", "content": PROMPT}], **body},
        timeout=20,
    )


def assert_noc_line(line: dict[str, object], **expected: object) -> None:
    assert line["level"] == "WARNING"
    assert line["role"] == "gateway"
    assert line["logger"] == "onecluster.gateway.calls"
    assert {k: line[k] for k in expected} == expected
    assert isinstance(line["elapsed_ms"], float) and line["elapsed_ms"] >= 0
    assert isinstance(line["call_id"], str) and line["call_id"] != line["request_id"]
    assert line["time"].endswith("Z")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("model", "status", "outcome", "upstream"),
    [
        ("gpt-badkey", 502, "upstream_failed", "openai-sg"),
        ("gpt-hang", 504, "upstream_timeout", "broken"),
    ],
)
def test_a_call_that_fails_upstream_is_logged_at_warning(
    gateway: tuple[Fleet, str, str], model: str, status: int, outcome: str, upstream: str
) -> None:
    fleet, url, key = gateway
    request_id = f"noc-{status}"
    reply = call(url, key, request_id, model)
    assert reply.status_code == status
    assert reply.headers["x-request-id"] == request_id
    line = line_of(fleet, request_id)
    assert_noc_line(
        line, team="vision", model=model, upstream=upstream, status=status, outcome=outcome
    )
    assert line["call_id"] == reply.headers["x-onecluster-call-id"]


def test_a_stream_cut_mid_way_is_logged_with_the_chunks_that_went_through(
    gateway: tuple[Fleet, str, str],
) -> None:
    fleet, url, key = gateway
    reply = call(url, key, "noc-cut", "gpt-cut", stream=True)
    assert reply.headers["x-request-id"] == "noc-cut"
    assert '"error"' in reply.text  # the stream ended with an error event
    line = line_of(fleet, "noc-cut")
    assert_noc_line(
        line,
        team="vision",
        model="gpt-cut",
        upstream="openai-sg",
        status=200,
        outcome="upstream_cut",
        chunks=4,  # the fake's role chunk, then three of text
        estimated=True,
    )
    assert isinstance(line["completion_tokens"], int) and line["completion_tokens"] > 0


def test_a_request_id_that_is_not_sane_is_replaced_and_the_call_id_stands_in(
    gateway: tuple[Fleet, str, str],
) -> None:
    fleet, url, key = gateway
    reply = call(url, key, "not sane; at all", "gpt-badkey")
    assert reply.status_code == 502
    assert reply.headers["x-request-id"] == reply.headers["x-onecluster-call-id"]
    assert line_of(fleet, reply.headers["x-request-id"])["status"] == 502
    models = httpx.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {key}",
                                                    "X-Request-ID": "list-1"})  # fmt: skip
    assert models.headers["x-request-id"] == "list-1"


def test_no_key_and_no_prompt_reach_the_log(gateway: tuple[Fleet, str, str]) -> None:
    fleet, url, key = gateway
    call(url, key, "noc-secrets", "gpt-badkey")
    line_of(fleet, "noc-secrets")
    text = (fleet.base / "gw.log").read_text()
    for secret in (key, key.rsplit("_", 1)[-1], *PROVIDER_KEYS.values()):
        assert secret not in text
    assert PROMPT not in text
    assert "the secret plans" not in text


def test_a_wrong_log_format_is_refused_naming_where_it_came_from(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path)
    fleet.config.write_text(gateway_yaml("http://127.0.0.1:9"))
    done = fleet.run("gateway", "serve", "--config", str(fleet.config), "--log-format", "xml")
    assert done.returncode == 2
    assert "--log-format is 'xml'; use one of text, json" in done.stderr

"""Request ids at the control plane: a real ``onecluster server --log-format json`` takes a
caller's sane ``X-Request-ID`` (else makes one), answers with it, and every line it logs
for that request carries it; the id is put into the request itself, which is what a follower
replica forwards to the leader."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.types import Message, Receive, Scope, Send

from onecluster.server._request_ids import RequestIds

FABRIC = Path(__file__).resolve().parents[2] / "examples" / "fabrics" / "three-site.yaml"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A server logging JSON at DEBUG to a file: its URL and the file."""
    base = tmp_path_factory.mktemp("server")
    state, log_path = base / "state", base / "server.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "onecluster.cli", "--state-dir", str(state), "server"),
                *("--fabric", str(FABRIC), "--port", "0"),
                *("--log-format", "json", "--log-level", "debug"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            url_file = state / "server.url"
            deadline = time.monotonic() + 60
            while not url_file.exists():
                assert proc.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.05)
            yield url_file.read_text().strip(), log_path
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def lines(log_path: Path) -> list[dict[str, object]]:
    # Every line the process wrote is one JSON object: uvicorn's and onecluster's alike.
    return [json.loads(line) for line in log_path.read_text().splitlines()]


def lines_of(log_path: Path, request_id: str) -> list[dict[str, object]]:
    deadline = time.monotonic() + 10
    while not (found := [x for x in lines(log_path) if x.get("request_id") == request_id]):
        assert time.monotonic() < deadline, f"no log line of {request_id}"
        time.sleep(0.05)
    return found


@pytest.mark.integration
def test_the_request_id_round_trips_and_is_on_the_servers_line_for_it(
    server: tuple[str, Path],
) -> None:
    url, log_path = server
    reply = httpx.get(f"{url}/api/v1/sites", headers={"X-Request-ID": "noc-7f3a"}, timeout=10)
    assert reply.status_code == 401  # no token: a refusal has its id too
    assert reply.headers["x-request-id"] == "noc-7f3a"
    (access,) = lines_of(log_path, "noc-7f3a")
    assert (access["logger"], access["level"], access["role"]) == (
        "onecluster.server.access", "DEBUG", "server",
    )  # fmt: skip
    assert (access["method"], access["path"], access["status"]) == ("GET", "/api/v1/sites", 401)
    assert str(access["time"]).endswith("Z")
    loggers = {str(x["logger"]) for x in lines(log_path)}
    assert "uvicorn.error" in loggers  # uvicorn's own lines come out as JSON too


@pytest.mark.integration
def test_a_missing_or_insane_request_id_is_replaced_by_a_new_one(
    server: tuple[str, Path],
) -> None:
    url, log_path = server
    for headers in ({}, {"X-Request-ID": "two words"}):
        reply = httpx.get(f"{url}/healthz", headers=headers, timeout=10)
        made = reply.headers["x-request-id"]
        assert len(made) == 32 and made != headers.get("X-Request-ID")
        assert lines_of(log_path, made)[0]["path"] == "/healthz"


def test_the_id_is_put_into_the_request_that_a_follower_forwards() -> None:
    seen: list[list[tuple[bytes, bytes]]] = []

    async def app(scope: Scope, _receive: Receive, send: Send) -> None:
        seen.append(list(scope["headers"]))
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"x-request-id", b"the-leaders-own")]})  # fmt: skip
        await send({"type": "http.response.body", "body": b""})

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    scope = {"type": "http", "method": "POST", "path": "/api/v1/agents/tokyo/sync",
             "headers": [(b"x-request-id", b"sync-1"), (b"x-request-id", b"again")]}  # fmt: skip
    asyncio.run(RequestIds(app)(scope, receive, send))
    assert [v for k, v in seen[0] if k == b"x-request-id"] == [b"sync-1"]  # one, the first
    assert [v for k, v in sent[0]["headers"] if k == b"x-request-id"] == [b"sync-1"]

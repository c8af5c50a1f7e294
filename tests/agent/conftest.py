"""A fake control plane for agent tests: the sync route on 127.0.0.1, scripted by the test.

It is a fake (not the real server): it records every sync body and answers with whatever
desired attempts the test has set, or fails on purpose (503, dropped connection, stopped).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

TOKEN = "agent-token-sha"
SITE = "sha"


class FakeControlPlane:
    """Scripted ``POST /api/v1/agents/{site}/sync``; thread-safe."""

    def __init__(self, *, interval_s: float = 0.05) -> None:
        self.interval_s = interval_s
        self.mode = "ok"  # "ok" | "503" | "not_leader" | "drop" | "garbage"
        self.lease_s: float | None = None  # sent as the reply's lease when set
        self._lock = threading.Lock()
        self._desired: list[dict[str, Any]] = []
        self._syncs: list[dict[str, Any]] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- scripting ----------------------------------------------------------------------------

    def want(self, *attempts: dict[str, Any]) -> None:
        with self._lock:
            self._desired = list(attempts)

    @property
    def syncs(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._syncs)

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 5.0
    ) -> dict[str, Any]:
        """The first sync body received from now on that satisfies ``predicate``."""
        seen = len(self.syncs)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for body in self.syncs[seen:]:
                if predicate(body):
                    return body
            time.sleep(0.01)
        pytest.fail(f"no sync matched within {timeout} s; last: {self.syncs[-1:]}")

    def wait_syncs(self, count: int, timeout: float = 5.0) -> None:
        """Wait until ``count`` more syncs have arrived."""
        target = len(self.syncs) + count
        deadline = time.monotonic() + timeout
        while len(self.syncs) < target:
            if time.monotonic() > deadline:
                pytest.fail(f"expected {count} more syncs within {timeout} s")
            time.sleep(0.01)

    def logs_of(self, attempt_id: str) -> str:
        """Every log chunk received for ``attempt_id``, checked to be contiguous."""
        text = ""
        for body in self.syncs:
            for chunk in body["logs"]:
                if chunk["attempt_id"] == attempt_id:
                    assert chunk["offset"] == len(text), "log chunks must be contiguous"
                    text += chunk["data"]
        return text

    # -- serving ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                fake._handle(self, body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _handle(self, handler: BaseHTTPRequestHandler, raw: bytes) -> None:
        if handler.path != f"/api/v1/agents/{SITE}/sync":
            return _answer(handler, 404, {"error": {"code": "not_found", "message": "no route"}})
        if handler.headers.get("Authorization") != f"Bearer {TOKEN}":
            return _answer(
                handler, 401, {"error": {"code": "unauthorized", "message": "bad token"}}
            )
        mode = self.mode
        if mode == "drop":
            return None  # close the connection without an answer
        if mode == "503":
            return _answer(handler, 503, {"error": {"code": "unavailable", "message": "db down"}})
        if mode == "not_leader":
            error = {"code": "not_leader", "message": "no replica leads now"}
            return _answer(handler, 503, {"error": error})
        if mode == "garbage":
            return _answer(handler, 200, {"nothing": "useful"})
        with self._lock:
            self._syncs.append(json.loads(raw))
            desired = list(self._desired)
        reply: dict[str, Any] = {"heartbeat_interval_s": self.interval_s, "attempts": desired}
        if self.lease_s is not None:
            reply["lease_s"] = self.lease_s
        return _answer(handler, 200, reply)


def _answer(handler: BaseHTTPRequestHandler, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def run_order(attempt_id: str, script: str, gpus: int = 1, **extra: Any) -> dict[str, Any]:
    """A desired attempt with action ``run`` as the server would send it."""
    order: dict[str, Any] = {
        "attempt_id": attempt_id,
        "job_id": f"job-{attempt_id}",
        "action": "run",
        "command": ["sh", "-c", script],
        "gpu_type": "H100",
        "gpus": gpus,
        "env": {},
        "grace_s": 10.0,
        "reason": None,
    }
    order.update(extra)
    return order


@pytest.fixture
def control_plane() -> Iterator[FakeControlPlane]:
    fake = FakeControlPlane()
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def make_run_order() -> Callable[..., dict[str, Any]]:
    return run_order

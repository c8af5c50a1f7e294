"""The SDK over several server replicas: which failures move a request to the next replica,
which do not (a POST that may have been done), and that the replica that answered sticks.

The rules are driven through ``httpx.MockTransport`` replicas that fail on purpose; the last
tests use real sockets on loopback (a closed port, a server that never answers, one that does)
so that the failures are the ones the network really raises.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from onecluster.client import Client
from onecluster.errors import (
    ConflictError,
    NotLeaderError,
    PlatformError,
    UnavailableError,
    ValidationError,
)
from onecluster.schema import JobSubmit

A, B, C = "http://a.test:8080", "http://b.test:8080", "http://c.test:8080"

JOB: dict[str, Any] = {
    "id": "j-1",
    "name": "job",
    "team": "llm",
    "state": "pending",
    "gpus": 8,
    "gpu_types": [],
    "duration_s": 60.0,
    "dataset": None,
    "dataset_bytes": 0,
    "priority": "normal",
    "preemptible": False,
    "command": [],
    "max_sites": 1,
    "submitted_at": 1.0,
    "started_at": None,
    "finished_at": None,
    "parts": [],
    "borrowed": False,
    "attempts": 0,
    "preemptions": 0,
    "exit_code": None,
    "reason": None,
}
SUBMIT = JobSubmit(team="llm", gpus=8, duration_s=60.0)


class Replicas:
    """Fake replicas behind one MockTransport, each doing what ``modes[host]`` says."""

    def __init__(self, **modes: str) -> None:
        self.modes = modes
        self.seen: list[tuple[str, str, str]] = []  # (host, method, path)
        self.pauses: list[float] = []  # the client's sleeps while an election is under way
        self.after_pause: dict[str, str] = {}  # what modes become once the client has paused

    def handler(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        self.seen.append((host, request.method, request.url.path))
        mode = self.modes[host]
        if mode == "refused":
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        if mode == "connect-timeout":
            raise httpx.ConnectTimeout("timed out", request=request)
        if mode == "read-timeout":
            raise httpx.ReadTimeout("timed out", request=request)
        if mode == "dropped":
            raise httpx.RemoteProtocolError(
                "Server disconnected without sending a response.", request=request
            )
        if mode in ("503", "not-leader"):
            code = "not_leader" if mode == "not-leader" else "unavailable"
            body = {"error": {"code": code, "message": f"{host} cannot", "hint": "wait"}}
            return httpx.Response(503, json=body)
        if mode == "409":
            return httpx.Response(409, json={"error": {"code": "conflict", "message": "no"}})
        if mode == "500":
            return httpx.Response(500, json={"error": {"code": "error", "message": "bug"}})
        assert mode == "ok", mode
        if request.method == "POST":
            return httpx.Response(201, json=JOB)
        return httpx.Response(200, json={"status": "ok", "replica": host})

    def client(self, servers: Any) -> Client:
        transport = httpx.MockTransport(self.handler)
        return Client(servers, "tok", transport=transport, sleep=self.pause)

    def pause(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.modes.update(self.after_pause)

    @property
    def hosts(self) -> list[str]:
        return [host for host, _, _ in self.seen]


@pytest.mark.parametrize("failure", ["refused", "connect-timeout", "read-timeout", "dropped"])
def test_a_get_moves_on_from_a_dead_or_silent_first_replica(failure: str) -> None:
    replicas = Replicas(**{"a.test": failure, "b.test": "ok"})
    with replicas.client(f"{A},{B}") as client:
        assert client.health() == {"status": "ok", "replica": "b.test"}
        assert client.base_url == B
    assert replicas.hosts == ["a.test", "b.test"]


def test_the_replica_that_answered_sticks_and_later_requests_go_straight_to_it() -> None:
    replicas = Replicas(**{"a.test": "refused", "b.test": "ok", "c.test": "ok"})
    with replicas.client([A, B, C]) as client:
        client.health()
        client.health()
        client.submit(SUBMIT)
        assert client.base_url == B
        replicas.modes["b.test"] = "refused"  # B dies in turn: round-robin goes on to C, not A
        client.health()
        assert client.base_url == C
    assert replicas.hosts == ["a.test", "b.test", "b.test", "b.test", "b.test", "c.test"]


@pytest.mark.parametrize("failure", ["refused", "connect-timeout"])
def test_a_post_that_never_left_is_sent_to_the_next_replica(failure: str) -> None:
    replicas = Replicas(**{"a.test": failure, "b.test": "ok"})
    with replicas.client(f"{A},{B}") as client:
        assert client.submit(SUBMIT).id == "j-1"
    assert replicas.seen == [("a.test", "POST", "/api/v1/jobs"), ("b.test", "POST", "/api/v1/jobs")]


@pytest.mark.parametrize(
    ("failure", "words"), [("read-timeout", "no answer in time"), ("dropped", "connection lost")]
)
def test_a_post_that_was_sent_and_got_no_answer_is_not_sent_again(failure: str, words: str) -> None:
    # A submission may have been created at A: sending it to B could create it twice.
    replicas = Replicas(**{"a.test": failure, "b.test": "ok"})
    with (
        replicas.client(f"{A},{B}") as client,
        pytest.raises(UnavailableError) as raised,
    ):
        client.submit(SUBMIT)
    assert replicas.hosts == ["a.test"]
    message = raised.value.message
    assert f"POST /api/v1/jobs was sent to the onecluster server at {A}" in message
    assert "whether it was done is unknown, so it was not sent to another server" in message
    assert words in message
    assert raised.value.hint is not None and "before trying again" in raised.value.hint


def test_an_unknown_outcome_names_the_replicas_tried_before() -> None:
    replicas = Replicas(**{"a.test": "refused", "b.test": "read-timeout", "c.test": "ok"})
    with replicas.client([A, B, C]) as client, pytest.raises(UnavailableError) as raised:
        client.cancel("j-1")
    assert replicas.hosts == ["a.test", "b.test"]
    assert f"sent to the onecluster server at {B}" in raised.value.message
    assert f"before it: {A}: cannot connect" in raised.value.message
    with replicas.client([A, B, C]) as client:
        replicas.modes["a.test"] = "read-timeout"
        assert client.health()["replica"] == "c.test"  # a GET goes on from a silent one


@pytest.mark.parametrize("answer", ["503", "not-leader"])
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_503_is_sent_to_the_next_replica_for_any_method(answer: str, method: str) -> None:
    # A 503 means the replica did nothing (not the leader, no database): safe to resend.
    replicas = Replicas(**{"a.test": answer, "b.test": "ok"})
    with replicas.client(f"{A},{B}") as client:
        if method == "GET":
            client.health()
        else:
            client.submit(SUBMIT)
        assert client.base_url == B
    assert [(h, m) for h, m, _ in replicas.seen] == [("a.test", method), ("b.test", method)]


@pytest.mark.parametrize(("answer", "error"), [("409", ConflictError), ("500", PlatformError)])
def test_any_other_answer_is_the_answer_and_is_not_sent_elsewhere(
    answer: str, error: type[PlatformError]
) -> None:
    replicas = Replicas(**{"a.test": answer, "b.test": "ok"})
    with replicas.client(f"{A},{B}") as client:
        with pytest.raises(error):
            client.submit(SUBMIT)
        assert client.base_url == A  # it answered: it is alive
    assert replicas.hosts == ["a.test"]


def test_when_every_replica_fails_the_error_names_each_and_what_went_wrong() -> None:
    replicas = Replicas(**{"a.test": "refused", "b.test": "503", "c.test": "read-timeout"})
    with replicas.client([A, B, C]) as client, pytest.raises(UnavailableError) as raised:
        client.jobs()
    assert replicas.hosts == ["a.test", "b.test", "c.test"]
    message = raised.value.message
    assert message.startswith("no onecluster server answered GET /api/v1/jobs; tried ")
    assert f"{A}: cannot connect ([Errno 111] Connection refused)" in message
    assert f"{B}: answered 503: b.test cannot" in message
    assert f"{C}: no answer in time (timed out)" in message
    assert raised.value.hint == "wait"  # the replica's own hint


def test_one_replica_keeps_the_errors_it_always_had() -> None:
    replicas = Replicas(**{"a.test": "not-leader"})
    with replicas.client(A) as client, pytest.raises(NotLeaderError) as raised:
        client.health()
    assert (raised.value.message, raised.value.hint) == ("a.test cannot", "wait")
    assert sum(replicas.pauses) <= 10.0 < sum(replicas.pauses) + 1.0  # it waited out 10 s
    replicas.modes["a.test"] = "refused"
    with replicas.client(A) as client, pytest.raises(UnavailableError) as unreachable:
        client.health()
    assert unreachable.value.message.startswith(f"cannot reach the onecluster server at {A}: ")


@pytest.mark.parametrize("servers", [A, f"{A},{B}"])
def test_while_nobody_leads_a_submission_waits_for_the_election_and_is_done_once(
    servers: str,
) -> None:
    replicas = Replicas(**{"a.test": "not-leader", "b.test": "not-leader"})
    replicas.after_pause = {"a.test": "ok"}  # a's lease taken over after the first pause
    with replicas.client(servers) as client:
        assert client.submit(SUBMIT).id == "j-1"
    assert replicas.pauses == [0.1]
    posts = [host for host, method, _ in replicas.seen if method == "POST"]
    assert posts.count("a.test") == 2 and len(posts) == (2 if servers == A else 3)


def test_an_election_is_waited_for_only_while_every_replica_says_not_leader() -> None:
    replicas = Replicas(**{"a.test": "not-leader", "b.test": "503"})
    with replicas.client(f"{A},{B}") as client, pytest.raises(UnavailableError) as raised:
        client.jobs()
    assert not isinstance(raised.value, NotLeaderError)
    assert replicas.pauses == []  # b is down for another reason: no election to wait for
    many = Replicas(**{"a.test": "not-leader", "b.test": "not-leader"})
    with many.client(f"{A},{B}") as client, pytest.raises(NotLeaderError) as waited:
        client.jobs()
    assert waited.value.message.startswith("no onecluster server answered GET /api/v1/jobs")
    assert many.pauses[:5] == [0.1, 0.2, 0.4, 0.8, 1.0]


@pytest.mark.parametrize(
    ("servers", "words"),
    [
        ("http://a:1,,http://b:2", "has an empty entry"),
        ("http://a:1,a:2", "must start with http:// or https://"),
        ("http://a:1,http://a:1", "names the same server twice"),
        ([], "is empty"),
    ],
)
def test_a_client_refuses_a_server_list_that_cannot_work(servers: Any, words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        Client(servers)


# -- real sockets -----------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # closed when the block ended: nothing listens there


@pytest.fixture
def silent() -> Iterator[str]:
    """A server that accepts connections and reads requests but never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


@pytest.fixture
def answering() -> Iterator[tuple[str, list[str]]]:
    """A server that answers every request (a job for a POST) and records them."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            seen.append(f"GET {self.path}")
            self._answer(200, {"status": "ok"})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            seen.append(f"POST {self.path}")
            self._answer(201, JOB)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    thread.join()
    server.server_close()


def test_real_sockets_a_closed_port_is_skipped_and_the_live_replica_sticks(
    answering: tuple[str, list[str]],
) -> None:
    live, seen = answering
    dead = f"http://127.0.0.1:{_closed_port()}"
    with Client(f"{dead}, {live}", "tok", timeout=5.0) as client:
        assert client.submit(SUBMIT).id == "j-1"  # refused: it never left, so it is resent
        assert client.base_url == live
        client.health()
    assert seen == ["POST /api/v1/jobs", "GET /healthz"]


def test_real_sockets_a_post_to_a_silent_replica_is_not_resent_but_a_get_is(
    silent: str, answering: tuple[str, list[str]]
) -> None:
    live, seen = answering
    with Client([silent, live], "tok", timeout=0.3) as client:
        with pytest.raises(UnavailableError, match="whether it was done is unknown"):
            client.submit(SUBMIT)
        assert seen == []
        assert client.base_url == live  # moved on from the silent one for what comes next
    with Client([silent, live], "tok", timeout=0.3) as client:
        assert client.health() == {"status": "ok"}
    assert seen == ["GET /healthz"]


def test_one_replica_that_took_a_post_and_went_silent_says_the_outcome_is_unknown() -> None:
    replicas = Replicas(**{"a.test": "read-timeout"})
    with replicas.client(A) as client, pytest.raises(UnavailableError) as raised:
        client.submit(SUBMIT)
    assert raised.value.message == (
        f"POST /api/v1/jobs was sent to the onecluster server at {A}, which gave no answer "
        "(no answer in time (timed out)); whether it was done is unknown"
    )

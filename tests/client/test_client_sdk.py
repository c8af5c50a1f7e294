"""The SDK maps error bodies back to the exception tree and unreachable servers to 503s."""

from __future__ import annotations

import socket

import httpx
import pytest

from onecluster.client import Client
from onecluster.errors import (
    AuthError,
    ConflictError,
    ForbiddenError,
    ImpossibleJobError,
    NotFoundError,
    PlatformError,
    UnavailableError,
    ValidationError,
)
from onecluster.schema import JobSubmit


def answering(status: int, body: object) -> Client:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["Authorization"] == "Bearer tok"
        if isinstance(body, bytes):
            return httpx.Response(status, content=body)
        return httpx.Response(status, json=body)

    return Client("http://onecluster.test", "tok", transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (400, "invalid", ValidationError),
        (401, "unauthorized", AuthError),
        (403, "forbidden", ForbiddenError),
        (404, "not_found", NotFoundError),
        (409, "conflict", ConflictError),
        (422, "job_impossible", ImpossibleJobError),
        (503, "unavailable", UnavailableError),
    ],
)
def test_error_bodies_map_to_the_class_with_the_same_code(
    status: int, code: str, cls: type[PlatformError]
) -> None:
    error = {"error": {"code": code, "message": "it went wrong", "hint": "do this"}}
    with answering(status, error) as client, pytest.raises(cls) as raised:
        client.job("j-1")
    assert type(raised.value) is cls
    assert (raised.value.message, raised.value.hint) == ("it went wrong", "do this")


def test_unknown_codes_and_foreign_bodies_fall_back_on_the_status() -> None:
    unknown = {"error": {"code": "gone_fishing", "message": "m"}}
    with answering(404, unknown) as client, pytest.raises(NotFoundError):
        client.job("j-1")
    with (
        answering(502, b"<html>bad gateway</html>") as client,
        pytest.raises(PlatformError, match="502"),
    ):
        client.stats()


def test_a_successful_answer_is_parsed_into_the_schema() -> None:
    job = {
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
    with answering(201, job) as client:
        out = client.submit(JobSubmit(team="llm", gpus=8, duration_s=60.0))
    assert (out.id, out.state, out.gpus) == ("j-1", "pending", 8)


def test_an_unreachable_server_is_unavailable_with_a_hint() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    with (
        Client(f"http://127.0.0.1:{port}", timeout=2.0) as client,
        pytest.raises(UnavailableError) as raised,
    ):
        client.health()
    assert raised.value.hint is not None
    assert "onecluster server" in raised.value.hint

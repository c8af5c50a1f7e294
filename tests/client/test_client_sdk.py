"""The SDK maps error bodies back to the exception tree and unreachable servers to 503s."""

from __future__ import annotations

import json
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
from onecluster.schema import AgentSync, JobSubmit


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
    # A server from before checkpoints (issue 16) says nothing of them: the job declared none.
    assert (out.checkpoint_interval_s, out.checkpoint_on_sigterm) == (None, False)


def test_a_jobs_checkpoints_go_on_the_wire_and_come_back() -> None:
    sent: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        answer = {
            **body,
            "id": "j-1",
            "state": "pending",
            "dataset_bytes": 0,
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
        del answer["dataset_gb"]
        return httpx.Response(201, json=answer)

    body = JobSubmit(
        team="llm",
        gpus=8,
        duration_s=3600.0,
        command=["train"],
        checkpoint_interval_s=600.0,
        checkpoint_on_sigterm=True,
    )
    with Client("http://onecluster.test", "tok", transport=httpx.MockTransport(handler)) as client:
        out = client.submit(body)
    assert (sent[0]["checkpoint_interval_s"], sent[0]["checkpoint_on_sigterm"]) == (600.0, True)
    assert (out.checkpoint_interval_s, out.checkpoint_on_sigterm) == (600.0, True)


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


def _recording(seen: list[httpx.Request]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = {"error": {"code": "not_found", "message": "there is no job x"}}
        return httpx.Response(404, json=body)

    return httpx.MockTransport(handler)


@pytest.mark.parametrize("token", ["tok\n", "tok\r\n", "  tok\t", "tok "])
def test_whitespace_around_a_token_is_dropped(token: str) -> None:
    seen: list[httpx.Request] = []
    client = Client("http://onecluster.test", token, transport=_recording(seen))
    with client, pytest.raises(NotFoundError):
        client.job("j-1")
    assert seen[0].headers["Authorization"] == "Bearer tok"


@pytest.mark.parametrize(
    ("token", "words"),
    [
        ("oc_ab cd", "character 6 is a space"),
        ("oc_ab\ncd", "character 6 is whitespace ('\\n')"),
        ("oc_ab\x00cd", "character 6 is a control character"),
        ("oc_abécd", "character 6 is not ASCII"),
        (" \n", "empty or only whitespace"),
    ],
)
def test_a_malformed_token_is_an_auth_error_not_an_unreachable_server(
    token: str, words: str
) -> None:
    """Before: httpx refused the header, and the SDK said "cannot reach the server"."""
    with pytest.raises(AuthError, match=r"malformed|empty") as raised:
        Client("http://onecluster.test", token)
    assert words in raised.value.message
    assert "cd" not in raised.value.message  # the secret is never echoed


@pytest.mark.parametrize(
    ("job_id", "path"),
    [
        ("..", "/api/v1/jobs/%2E%2E/cancel"),
        (".", "/api/v1/jobs/%2E/cancel"),
        ("a b?c#d", "/api/v1/jobs/a%20b%3Fc%23d/cancel"),
        ("j-1%2F..", "/api/v1/jobs/j-1%252F%2E%2E/cancel"),
    ],
)
def test_a_job_id_is_always_one_path_segment(job_id: str, path: str) -> None:
    seen: list[httpx.Request] = []
    client = Client("http://onecluster.test", "tok", transport=_recording(seen))
    with client, pytest.raises(NotFoundError):
        client.cancel(job_id)
    assert seen[0].url.raw_path.decode() == path


@pytest.mark.parametrize("job_id", ["../../etc/passwd", "a/b", ""])
def test_an_id_no_route_could_address_is_not_found_by_name(job_id: str) -> None:
    seen: list[httpx.Request] = []
    with Client("http://onecluster.test", "tok", transport=_recording(seen)) as client:
        for call in (client.job, client.cancel, client.logs):
            with pytest.raises(NotFoundError) as raised:
                call(job_id)
            assert raised.value.message == f"there is no job {job_id!r}"
        with pytest.raises(NotFoundError, match="there is no site"):
            client.agent_sync(job_id, AgentSync(agent_id="a"))
    assert seen == []  # nothing was sent: the server would route it somewhere else

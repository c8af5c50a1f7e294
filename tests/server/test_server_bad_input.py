"""Bad input at the REST door, over a real socket: a clear error in the error schema, and
nothing stored.  Each case is a finding of the outside check of issue 12 (docs/bad-inputs.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest

if TYPE_CHECKING:
    from conftest import RunningServer

JOB: dict[str, Any] = {"team": "llm", "gpus": 8, "duration_s": 60, "command": ["true"]}


def _post(server: RunningServer, path: str, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {server.admin_token}", **kw.pop("headers", {})}
    return httpx.post(f"{server.url}/api/v1{path}", headers=headers, timeout=30, **kw)


def _get(server: RunningServer, path: str, **params: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {server.admin_token}"}
    return httpx.get(f"{server.url}/api/v1{path}", headers=headers, params=params, timeout=30)


def _error(response: httpx.Response, status: int, code: str) -> dict[str, str]:
    assert response.status_code == status, response.text
    error: dict[str, str] = response.json()["error"]
    assert error["code"] == code
    return error


def _nothing_stored(server: RunningServer) -> None:
    assert server.admin().jobs() == []


@pytest.mark.parametrize("command", [None, [], [""]])
def test_a_job_without_a_command_is_refused_at_admission(
    server: RunningServer, command: list[str] | None
) -> None:
    body = {k: v for k, v in JOB.items() if k != "command"}
    if command is not None:
        body["command"] = command
    error = _error(_post(server, "/jobs", json=body), 422, "job_impossible")
    assert "needs a command" in error["message"]
    assert "train.py" in error["hint"]
    _nothing_stored(server)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"gpus": "8"}, "gpus"),
        ({"duration_s": 1e308}, "duration_s"),
        ({"preemptible": "true"}, "preemptible"),
        ({"name": "x" * 200_000}, "name"),
        ({"name": "report\u202etxt.exe"}, "name"),
        ({"command": ["x" * 200_000]}, "command"),
        ({"team": "llm\u2066"}, "team"),
    ],
)
def test_loose_types_and_unbounded_fields_are_refused(
    server: RunningServer, change: dict[str, Any], field: str
) -> None:
    error = _error(_post(server, "/jobs", json=JOB | change), 400, "invalid")
    assert error["message"].startswith(f"the request is not valid: {field}")
    assert len(error["message"]) < 1000  # the refusal does not echo megabytes back
    _nothing_stored(server)


def test_a_body_over_the_limit_is_413_before_it_is_parsed(server: RunningServer) -> None:
    big = JOB | {"command": ["x" * 10_000_000], "name": "y" * 10_000_000}
    error = _error(_post(server, "/jobs", json=big), 413, "too_large")
    assert "1 MiB" in error["message"] and "docs/contracts.md" in error["hint"]
    _nothing_stored(server)


def test_a_streamed_body_over_the_limit_is_413(server: RunningServer) -> None:
    """No Content-Length: the bytes are counted as they arrive."""

    def chunks() -> Iterator[bytes]:
        yield b'{"team": "llm", "gpus": 8, "duration_s": 60, "command": ["'
        for _ in range(40):
            yield b"x" * 65_536
        yield b'"]}'

    response = _post(
        server, "/jobs", content=chunks(), headers={"Content-Type": "application/json"}
    )
    _error(response, 413, "too_large")
    _nothing_stored(server)


@pytest.mark.parametrize(
    ("headers", "content"),
    [
        ({"Content-Type": "text/plain"}, b'{"team": "llm"}'),
        ({"Content-Type": "application/x-www-form-urlencoded"}, b"team=llm&gpus=8"),
        ({"Content-Type": "multipart/form-data; boundary=x"}, b"--x\r\n\r\nllm\r\n--x--\r\n"),
    ],
)
def test_a_body_that_is_not_json_is_415(
    server: RunningServer, headers: dict[str, str], content: bytes
) -> None:
    for path in ("/jobs", "/tokens", "/agents/tokyo/sync"):
        error = _error(
            _post(server, path, content=content, headers=headers), 415, "unsupported_media"
        )
        assert "JSON" in error["message"] and "application/json" in error["hint"]
    _nothing_stored(server)


def test_json_with_a_vendor_media_type_is_taken(server: RunningServer) -> None:
    response = _post(
        server,
        "/jobs",
        content=httpx.Request("POST", "/", json=JOB).content,
        headers={"Content-Type": "application/vnd.onecluster+json; charset=utf-8"},
    )
    assert response.status_code == 201, response.text


def test_an_undeclared_dataset_is_refused_naming_the_known_ones(server: RunningServer) -> None:
    error = _error(
        _post(server, "/jobs", json=JOB | {"dataset": "nosuch-ds"}), 422, "job_impossible"
    )
    assert "nosuch-ds" in error["message"]
    assert "cc-zh-2026" in error["hint"]
    _nothing_stored(server)


@pytest.mark.parametrize(
    ("params", "needle", "known"),
    [({"team": "nosuch"}, "team 'nosuch'", "llm"), ({"site": "mars"}, "site 'mars'", "tokyo")],
)
def test_listing_jobs_of_an_unknown_team_or_site_is_404(
    server: RunningServer, params: dict[str, str], needle: str, known: str
) -> None:
    error = _error(_get(server, "/jobs", **params), 404, "not_found")
    assert needle in error["message"] and known in error["hint"]


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/jobs", {"offset": 10**30}),
        ("/jobs", {"team": "t" * 10_000}),
        ("/jobs/j-1/logs", {"offset": 10**30}),
        ("/events", {"after": 10**30}),
        ("/reports/gpu", {"month": "2026-01" * 1000}),
    ],
)
def test_numbers_and_names_in_queries_are_bounded(
    server: RunningServer, path: str, params: dict[str, Any]
) -> None:
    _error(_get(server, path, **params), 400, "invalid")


def test_an_agent_capacity_report_is_bounded(server: RunningServer) -> None:
    token = server.token(role="agent", site="tokyo")
    for capacity in ({"H800": -5, "TPU": 9}, {"H800": 10**23}, {"H800": "8"}):
        response = httpx.post(
            f"{server.url}/api/v1/agents/tokyo/sync",
            json={"agent_id": "a-1", "capacity": capacity},
            headers={"Authorization": f"Bearer {token}"},
        )
        error = _error(response, 400, "invalid")
        assert "capacity.H800" in error["message"]
    assert [s.status for s in server.admin().sites() if s.name == "tokyo"] == ["unknown"]


def test_a_wrong_method_is_405_with_the_allowed_ones(server: RunningServer) -> None:
    response = httpx.delete(f"{server.url}/api/v1/jobs")
    _error(response, 405, "method_not_allowed")
    assert response.headers["allow"] == "GET, POST"


def test_a_body_that_is_not_json_says_so(server: RunningServer) -> None:
    response = _post(
        server, "/jobs", content=b'{"team": llm}', headers={"Content-Type": "application/json"}
    )
    error = _error(response, 400, "invalid")
    assert "the body is not valid JSON (at character 9)" in error["message"]

"""The dashboard's page, assets, ``whoami`` and live stream, on a real server (no browser:
``tests/lab/test_lab_dashboard.py`` drives Chromium against the three-site lab)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from onecluster.server import _routes_live
from onecluster.server._routes_live import TICK_S

if TYPE_CHECKING:
    from conftest import RunningServer

DASHBOARD = Path(__file__).resolve().parents[2] / "src/onecluster/server/dashboard"
_REFERENCE = re.compile(r"""(?:src|href)="([^"]+)"|from "\.(/[^"]+)"|import\("\.(/[^"]+)"\)""")
_ABSOLUTE = re.compile(r"""https?://[^\s"'`)]+""")
_SVG_NAMESPACE = "http://www.w3.org/2000/svg"


def _assets(server: RunningServer) -> dict[str, httpx.Response]:
    """Every asset the page loads, following the scripts' imports."""
    seen: dict[str, httpx.Response] = {}
    page = httpx.get(server.url + "/", timeout=10)
    todo = ["/" + m for m in _references(page.text)]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        answer = httpx.get(server.url + path, timeout=10)
        seen[path] = answer
        if path.endswith(".js"):
            todo.extend(f"/ui/{m}" for m in _references(answer.text))
    return seen


def _references(text: str) -> list[str]:
    return [(a or b or c).lstrip("/") for a, b, c in _REFERENCE.findall(text)]


def test_the_page_and_every_asset_it_loads_come_from_the_server_itself(
    server: RunningServer,
) -> None:
    page = httpx.get(server.url + "/", timeout=10)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "script-src 'self'" in policy
    assets = _assets(server)
    assert {"/ui/app.js", "/ui/app.css", "/ui/api.js", "/ui/views.js", "/ui/verify.js"} <= set(
        assets
    )
    for path, answer in assets.items():
        assert answer.status_code == 200, path
        assert len(answer.content) > 100, path
        if path.endswith(".js"):
            assert "javascript" in answer.headers["content-type"], path
        outside = [u for u in _ABSOLUTE.findall(answer.text) if u != _SVG_NAMESPACE]
        assert outside == [], f"{path} refers outside the server: {outside}"


@pytest.mark.parametrize(
    "path", ["/ui/index.html", "/ui/", "/ui", "/ui/nothing.js", "/ui/..%2Fapp.js", "/ui/.app.js"]
)
def test_the_page_is_served_only_at_the_root_and_ui_serves_only_assets(
    server: RunningServer, path: str
) -> None:
    """The page without its headers (at ``/ui/index.html``, say) could be framed and would
    load whatever it is told to; ``/ui/`` lists nothing."""
    assert httpx.get(server.url + path, timeout=10).status_code == 404


def test_every_answer_of_the_dashboard_carries_its_security_headers_and_revalidates(
    server: RunningServer,
) -> None:
    for path in ["/", "/ui/app.js", "/ui/app.css", "/ui/favicon.svg"]:
        answer = httpx.get(server.url + path, timeout=10)
        assert answer.status_code == 200, path
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"], path
        assert answer.headers["x-content-type-options"] == "nosniff", path
        assert answer.headers["cache-control"] == "no-cache", path
        again = httpx.get(
            server.url + path, headers={"If-None-Match": answer.headers["etag"]}, timeout=10
        )
        assert (again.status_code, again.content) == (304, b""), path
    head = httpx.head(server.url + "/", timeout=10)
    assert (head.status_code, head.content) == (200, b"")


def test_every_asset_in_the_package_is_one_the_page_loads() -> None:
    """A file added to the folder but never loaded, or loaded but not shipped, fails here."""
    shipped = {p.name for p in DASHBOARD.iterdir() if p.is_file()}
    html = (DASHBOARD / "index.html").read_text()
    loaded = {"index.html"} | {Path(m).name for m in _references(html)}
    for script in [p for p in DASHBOARD.glob("*.js")]:
        loaded |= {Path(m).name for m in _references(script.read_text())}
    assert shipped == loaded


def test_the_dashboard_is_not_an_operation_of_the_api(server: RunningServer) -> None:
    paths = httpx.get(server.url + "/openapi.json", timeout=10).json()["paths"]
    assert "/" not in paths and "/api/v1/live" not in paths
    assert "/api/v1/whoami" in paths


def test_whoami_names_the_role_and_team_of_any_valid_token(server: RunningServer) -> None:
    member = server.token(role="member", team="llm", holder="ana")
    compliance = server.token(role="compliance", holder="li")
    answers = {
        name: httpx.get(
            server.url + "/api/v1/whoami", headers={"Authorization": f"Bearer {secret}"}
        ).json()
        for name, secret in [("admin", server.admin_token), ("member", member), ("c", compliance)]
    }
    assert answers["admin"]["role"] == "admin"
    assert answers["member"] == {"role": "member", "team": "llm", "site": None, "holder": "ana"}
    assert answers["c"]["role"] == "compliance" and answers["c"]["team"] is None
    nobody = httpx.get(server.url + "/api/v1/whoami", headers={"Authorization": "Bearer oc_x"})
    assert nobody.status_code == 401


class _Stream:
    """A reader of ``/api/v1/live``: its events as (kind, id, data), one at a time."""

    def __init__(self, response: httpx.Response) -> None:
        self._lines: Iterator[str] = response.iter_lines()

    def next(self) -> tuple[str, int | None, dict[str, object]]:
        kind, ident, data = "message", None, ""
        for line in self._lines:
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("id: "):
                ident = int(line[4:])
            elif line.startswith("data: "):
                data = line[6:]
            elif line == "" and data:
                return kind, ident, json.loads(data)
        raise AssertionError("the stream ended")

    def feed(self, count: int) -> list[tuple[int | None, dict[str, object]]]:
        """The next ``count`` feed events (ticks skipped; bounded by the server's ticks)."""
        found: list[tuple[int | None, dict[str, object]]] = []
        for _ in range(count * 20):
            kind, ident, data = self.next()
            if kind == "feed":
                found.append((ident, data))
                if len(found) == count:
                    return found
        raise AssertionError(f"only {len(found)} of {count} events came")


@contextmanager
def _live(server: RunningServer, **headers: str) -> Iterator[httpx.Response]:
    with httpx.Client(timeout=10 * TICK_S + 5) as client:
        request = client.build_request(
            "GET",
            server.url + "/api/v1/live",
            headers={"Authorization": f"Bearer {server.admin_token}", **headers},
        )
        response = client.send(request, stream=True)
        try:
            yield response
        finally:
            response.close()


def test_the_live_stream_pushes_each_new_event_once_and_resumes_without_a_gap(
    server: RunningServer,
) -> None:
    store = server.control.store
    store.add_events([("test", "before the stream")], now=server.clock.now())
    with _live(server) as first:
        assert first.status_code == 200
        assert first.headers["content-type"].startswith("text/event-stream")
        stream = _Stream(first)
        kind, _, tick = stream.next()
        assert kind == "tick" and "time" in tick  # only events still to come, then ticks
        store.add_events([("test", "one"), ("test", "two")], now=server.clock.now())
        got = stream.feed(2)
    assert [d["message"] for _, d in got] == ["one", "two"]
    assert got[0][0] == got[0][1]["id"] and got[1][0] == got[1][1]["id"]
    store.add_events([("test", "three")], now=server.clock.now())  # while nobody listens
    with _live(server, **{"Last-Event-ID": str(got[0][0])}) as again:
        resumed = _Stream(again).feed(2)
    assert [d["message"] for _, d in resumed] == ["two", "three"]


@pytest.mark.parametrize("bad", [b"x1", b"-3", b"1" * 23, b"\xb2", b"\xb9\xb2"])
def test_a_bad_last_event_id_is_refused_with_a_clear_error(
    server: RunningServer, bad: bytes
) -> None:
    """Raw header bytes: ``\\xb2`` reads as '²' (latin-1), which ``str.isdigit`` calls a digit."""
    answer = httpx.get(
        server.url + "/api/v1/live",
        headers={"Authorization": f"Bearer {server.admin_token}".encode(), "Last-Event-ID": bad},
        timeout=10,
    )
    assert answer.status_code == 400
    assert "Last-Event-ID" in answer.json()["error"]["message"]


def test_the_live_stream_needs_a_token(server: RunningServer) -> None:
    assert httpx.get(server.url + "/api/v1/live", timeout=10).status_code == 401


def test_a_stream_of_events_is_not_timed_as_a_request(server: RunningServer) -> None:
    """A stream lasts as long as its reader: timing it would put minutes into the request
    latency that the API's objectives are judged by."""
    with _live(server) as stream:
        assert _Stream(stream).next()[0] == "tick"
    httpx.get(server.url + "/api/v1/whoami", headers={"Authorization": "Bearer oc_x"})
    text = httpx.get(server.url + "/metrics", timeout=10).text
    timed = [
        line
        for line in text.splitlines()
        if line.startswith("onecluster_http_request_duration_seconds_count")
    ]
    assert any('route="/api/v1/whoami"' in line for line in timed), timed
    assert not any('route="/api/v1/live"' in line for line in timed), timed


def test_a_stream_beyond_the_servers_most_is_refused_and_one_closed_frees_its_place(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_routes_live, "MAX_STREAMS", 1)
    with _live(server) as first:
        reader = _Stream(first)  # kept: dropping the reader would close the stream
        assert reader.next()[0] == "tick"
        with _live(server) as refused:
            assert refused.status_code == 503
            assert "live streams" in json.loads(refused.read())["error"]["message"]
        assert reader.next()[0] == "tick"  # the first one goes on

    def freed() -> bool:
        with _live(server) as again:
            return again.status_code == 200

    deadline = time.monotonic() + 10
    while not freed():  # the server sees the first reader gone at its next tick
        assert time.monotonic() < deadline, "the closed stream's place was never freed"
        time.sleep(0.2)

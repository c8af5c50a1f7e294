"""``GET /metrics`` of a real server: the state of the cluster read at scrape time (jobs,
pools, sites, circuits, the register), request and reconcile timings, and a section that
cannot be read left out without failing the scrape."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text
from test_server_cluster import start_one  # a job of vision running at singapore

from onecluster.errors import UnavailableError
from onecluster.schema import JobSubmit

if TYPE_CHECKING:
    from conftest import RunningServer

pytestmark = pytest.mark.integration

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(server: RunningServer) -> Samples:
    r = httpx.get(f"{server.url}/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def test_metrics_need_no_token_and_are_not_in_the_api_schema(server: RunningServer) -> None:
    samples = scrape(server)
    assert value(samples, "onecluster_leader") == 1
    assert value(samples, "onecluster_leader_term") == 1
    assert "/metrics" not in httpx.get(f"{server.url}/openapi.json").json()["paths"]


def test_jobs_pools_and_sites_are_read_from_the_store(server: RunningServer) -> None:
    start_one(server)
    server.admin().submit(
        JobSubmit(team="llm", gpus=8, duration_s=60.0, gpu_types=["H800"], command=["true"])
    )
    server.clock.advance(7)
    s = scrape(server)
    assert value(s, "onecluster_jobs", team="vision", site="singapore", state="running") == 1
    assert value(s, "onecluster_jobs", team="llm", site="", state="pending") == 1
    assert value(s, "onecluster_jobs", team="speech", site="", state="pending") == 0
    assert value(s, "onecluster_pool_gpus", site="singapore", gpu_type="H100") == 384
    assert value(s, "onecluster_pool_gpus_used", site="singapore", gpu_type="H100") == 64
    assert value(s, "onecluster_pool_draining", site="singapore", gpu_type="H100") == 0
    assert value(s, "onecluster_site_status", site="singapore", status="up") == 1
    assert value(s, "onecluster_site_status", site="tokyo", status="unknown") == 1
    assert value(s, "onecluster_site_status", site="tokyo", status="up") == 0
    assert value(s, "onecluster_site_last_sync_age_seconds", site="singapore") == 7
    assert value(s, "onecluster_site_last_sync_age_seconds", site="tokyo") is None


def test_circuits_and_routes_come_from_the_leader_s_board(server: RunningServer) -> None:
    s = scrape(server)
    circuits = {c.circuit for c in server.control.links.links(server.clock.now())}
    assert circuits
    for circuit in circuits:
        states = {
            state: value(s, "onecluster_circuit_state", circuit=circuit, state=state)
            for state in ("unknown", "up", "degraded", "down")
        }
        assert sum(v or 0 for v in states.values()) == 1, states
    assert value(s, "onecluster_route_changes_total") == 0


def test_requests_are_timed_by_route_template_and_status_class(server: RunningServer) -> None:
    job_id = start_one(server)
    server.admin().job(job_id)
    assert httpx.get(f"{server.url}/api/v1/no/such/{job_id}").status_code == 404
    s = scrape(server)
    count = "onecluster_http_request_duration_seconds_count"
    ok = value(s, count, method="GET", route="/api/v1/jobs/{job_id}", status_class="2xx")
    assert ok == 1
    assert value(s, count, method="GET", route="unmatched", status_class="4xx") == 1
    assert not any(job_id in dict(labels).get("route", "") for _, labels in s)


def test_reconcile_passes_and_their_phases_are_timed(server: RunningServer) -> None:
    before = value(scrape(server), "onecluster_reconcile_pass_duration_seconds_count") or 0
    server.step()
    server.step()
    s = scrape(server)
    assert value(s, "onecluster_reconcile_pass_duration_seconds_count") == before + 2
    phase = "onecluster_reconcile_phase_duration_seconds_count"
    assert value(s, phase, phase="plan") == before + 2


def test_the_register_is_verified_at_most_once_a_minute_and_a_tampering_shows(
    server: RunningServer,
) -> None:
    s = scrape(server)
    assert value(s, "onecluster_register_verified") == 1
    verified_at = value(s, "onecluster_register_last_success_timestamp_seconds")
    assert verified_at == server.clock.now()
    with server.control.store.engine.begin() as conn:  # a row added by hand
        conn.execute(
            text("INSERT INTO register_checkpoints (position, line) VALUES (:p, :l)"),
            {"p": 1_000, "l": b'{"not": "a checkpoint"}'},
        )
    assert value(scrape(server), "onecluster_register_verified") == 1  # not due again yet
    server.clock.advance(61)
    s = scrape(server)
    assert value(s, "onecluster_register_verified") == 0
    assert value(s, "onecluster_register_last_success_timestamp_seconds") == verified_at
    assert value(s, "onecluster_register_last_check_timestamp_seconds") == server.clock.now()


def test_a_section_that_cannot_be_read_is_left_out_and_the_rest_is_served(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down(**_: object) -> None:
        raise UnavailableError("the database is down")

    monkeypatch.setattr(server.control.store, "transfers", down)
    s = scrape(server)
    assert value(s, "onecluster_metrics_section_up", section="transfers") == 0
    assert value(s, "onecluster_metrics_section_up", section="jobs") == 1
    assert value(s, "onecluster_leader") == 1
    assert not any(name.startswith("onecluster_transfer") for name, _ in s)

"""The agent sync door: who may knock, what a capacity report may say, and that only a
recorded sync grants a lease."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import httpx
import pytest
from sqlalchemy import create_engine

from onecluster.errors import UnavailableError
from onecluster.schema import AgentSync, AttemptReport, JobSubmit
from onecluster.store import Store

if TYPE_CHECKING:
    from conftest import RunningServer


def post(server: RunningServer, site: str, token: str | None, **kw: object) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(f"{server.url}/api/v1/agents/{site}/sync", headers=headers, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "body",
    [
        {"content": b"{not json", "headers": {"Content-Type": "application/json"}},
        {"json": {"agent_id": ""}},
        {"json": {"capacity": "lots"}},
    ],
)
def test_a_stranger_is_refused_before_its_body_is_read(
    server: RunningServer, body: dict[str, object]
) -> None:
    extra = body.pop("headers", {})
    for token in (None, "oc_not-a-token"):
        headers = {**({"Authorization": f"Bearer {token}"} if token else {}), **extra}  # type: ignore[dict-item]
        answer = httpx.post(
            f"{server.url}/api/v1/agents/shanghai/sync",
            headers=headers,
            **body,  # type: ignore[arg-type]
        )
        assert answer.status_code == 401, answer.text
    other_site = server.token(role="agent", site="tokyo")
    answer = post(server, "shanghai", other_site, json={"agent_id": ""})
    assert answer.status_code == 403, answer.text


def test_a_capacity_of_gpu_types_the_site_has_no_pool_of_is_refused(
    server: RunningServer,
) -> None:
    token = server.token(role="agent", site="shanghai")
    body = AgentSync(agent_id="spoof", capacity={"H800": 8, "TPU": 9}).model_dump(mode="json")
    answer = post(server, "shanghai", token, json=body)
    assert answer.status_code == 400, answer.text
    message = answer.json()["error"]["message"]
    assert "TPU" in message and "shanghai" in message
    assert "H800" in answer.json()["error"]["hint"]
    assert {s.name: s.status for s in server.admin().sites()}["shanghai"] == "unknown"


def test_a_capacity_report_never_requeues_running_work(server: RunningServer) -> None:
    admin = server.admin()
    server.sync("shanghai", capacity={"H800": 384})
    job = admin.submit(
        JobSubmit(team="llm", gpus=8, duration_s=3600.0, gpu_types=["H800"], command=["x"])
    )
    server.step()
    [run] = server.sync("shanghai").attempts
    server.sync(
        "shanghai", AttemptReport(attempt_id=run.attempt_id, job_id=run.job_id, state="running")
    )
    # Another agent id reports only its capacity: the running job is not its to give up.
    reply = server.sync("shanghai", agent_id="newcomer", capacity={"H800": 0})
    assert [(a.attempt_id, a.handed_to) for a in reply.attempts] == [(run.attempt_id, "agent-1")]
    server.step()
    assert admin.job(job.id).state == "running"
    assert admin.job(job.id).attempts == 1


def test_a_server_that_cannot_reach_its_database_grants_no_lease(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.sync("shanghai")
    before = server.control.store.sites()[0].last_heartbeat
    server.clock.advance(5)
    # The database goes away under the running server (here: a store whose file cannot be
    # opened stands in for an unreachable database).
    gone = Store(create_engine("sqlite:////dev/null/unreachable.db"))
    monkeypatch.setattr(server.control, "store", gone)
    with pytest.raises(UnavailableError, match="database"):
        server.sync("shanghai")
    monkeypatch.undo()
    assert server.control.store.sites()[0].last_heartbeat == before


def test_an_elected_replica_takes_no_sync_before_it_has_taken_office(
    server: RunningServer,
) -> None:
    # Between winning the election and reading the links the leader before kept, a sync
    # would be judged on a board about to be replaced: it is refused, nothing recorded, and
    # taken once the replica is in office.
    token = server.token(role="agent", site="shanghai")
    body = {"json": {"agent_id": "agent-1", "capacity": {"H800": 8}}}
    assert post(server, "shanghai", token, **body).status_code == 200
    before = {s.name: s.last_heartbeat for s in server.admin().sites()}["shanghai"]
    term = server.control.links.office
    assert term is not None
    server.control.links.stand_by()
    server.clock.advance(1.0)
    refused = post(server, "shanghai", token, **body)
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "not_leader"
    assert {s.name: s.last_heartbeat for s in server.admin().sites()}["shanghai"] == before
    server.control.resume_links(term)
    assert post(server, "shanghai", token, **body).status_code == 200


def test_a_replica_that_lost_the_lease_and_won_it_back_takes_office_before_its_next_pass(
    server: RunningServer,
) -> None:
    """Its passes are an hour apart here: waiting for the next one, it refused every sync
    of the new term (503 not_leader) — on a loaded host, a renewal a little late was enough."""
    token = server.token(role="agent", site="shanghai")
    body = {"json": {"agent_id": "agent-1", "capacity": {"H800": 8}}}
    assert post(server, "shanghai", token, **body).status_code == 200
    election = server.election
    term = election.term
    election.resign()  # the lease is vacant; the election takes it again, in a new term
    deadline = time.monotonic() + 20
    while (
        election.mandate() in (None, term)
        or post(server, "shanghai", token, **body).status_code != 200
    ):
        assert time.monotonic() < deadline, (election.mandate(), server.control.links.office)
        time.sleep(0.05)
    assert server.control.links.office == election.term > term

"""Two replicas on one PostgreSQL database share one export register: an export through the
leader, the leader stopped, an export through the replica that leads next — and the
register holds both, in one chain that verifies with the one key."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from test_server_exports import _approval_body, _register_dataset, patients, planes

from onecluster.agent._data import SiteData
from onecluster.clock import ManualClock
from onecluster.register import read_public_key, verify
from onecluster.schema import ExportIn
from onecluster.server import copy_register

if TYPE_CHECKING:
    from conftest import RunningServer

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

__all__ = ["planes"]  # the fixture, used here


@pytest.fixture
def replicas(tmp_path: Path, clock: ManualClock) -> Iterator[tuple[RunningServer, RunningServer]]:
    from tests.server.conftest import RunningServer, emptied_postgres

    url = emptied_postgres()
    a = RunningServer(tmp_path / "a", clock, db_url=url)
    a.start()  # the first replica makes the register's key in its state folder
    b = RunningServer(tmp_path / "b", clock, db_url=url)
    b.config = replace(b.config, register_key=a.config.state_dir / "register" / "signing.key")
    b.start()
    yield a, b
    b.stop()
    a.stop()


def _until(
    server: RunningServer,
    planes: dict[str, SiteData],
    tokens: dict[str, str],
    done: Callable[[], bool],
) -> None:
    from onecluster.schema import AgentSync

    deadline = time.monotonic() + 60
    while not done():
        assert time.monotonic() < deadline, "the export did not get there"
        for site, plane in planes.items():
            sync = AgentSync(agent_id="agent-1", attempts=[], data=plane.report())
            plane.apply(server.client(tokens[site]).agent_sync(site, sync).data)
        server.step()
        time.sleep(0.05)


def test_exports_through_two_leaders_in_turn_are_one_chain_in_the_register(
    replicas: tuple[RunningServer, RunningServer],
    planes: dict[str, SiteData],
    tmp_path: Path,
) -> None:
    a, b = replicas
    tokens = {site: a.token(role="agent", site=site) for site in planes}
    a._agent_tokens = dict(tokens)
    _register_dataset(a, planes, patients(tmp_path / "patients"))
    member_token = a.token(role="member", team="llm", holder="alice")
    bob_token = a.token(role="compliance", holder="bob")
    auditor_token = a.token(role="auditor", holder="carol")
    member, bob = a.client(member_token), a.client(bob_token)
    approval = bob.approve(member.request_approval(_approval_body()).id)
    first = member.start_export(ExportIn(dataset="patients", to="singapore", approval=approval.id))
    _until(a, planes, tokens, lambda: member.export(first.id).state == "done")
    head_at_a = a.client(auditor_token).register_head()

    a.stop()  # a clean stop: b leads at once
    deadline = time.monotonic() + 20
    while not b._app.state.election.leading:
        assert time.monotonic() < deadline, "b did not take the lead"
        time.sleep(0.02)
    member_b = b.client(member_token)
    again = b.client(bob_token).approve(member_b.request_approval(_approval_body()).id)
    second = member_b.start_export(ExportIn(dataset="patients", to="singapore", approval=again.id))
    _until(b, planes, tokens, lambda: member_b.export(second.id).state == "done")

    auditor = b.client(auditor_token)
    head = auditor.register_head()
    assert head.size == head_at_a.size + 2  # b's entries follow a's, in the same chain
    proof = auditor.register_proof(size1=head_at_a.size)
    assert proof.kind == "consistency" and proof.root == head.root
    copied = tmp_path / "copy"
    copy_register(b.control.store, copied)
    pinned = read_public_key(a.config.state_dir / "register" / "public.key")
    report = verify(copied, public_key=pinned)
    assert (report.size, report.root) == (head.size, head.root)
    entries = [e for e in (b.control.exports.readable().entries()) if e.get("type") != "refused"]
    assert [(e["export"], e["type"]) for e in entries] == [
        (first.id, "intent"),
        (first.id, "complete"),
        (second.id, "intent"),
        (second.id, "complete"),
    ]
    assert [e["seq"] for e in entries] == sorted(e["seq"] for e in entries)

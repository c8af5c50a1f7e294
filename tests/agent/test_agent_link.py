"""ServerLink and Agent.sync_once against the fake control plane: errors are translated."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from onecluster.agent import Agent, ServerLink
from onecluster.backends import LocalBackend
from onecluster.errors import AuthError, NotLeaderError, UnavailableError, ValidationError
from onecluster.model import AttemptState
from onecluster.schema import AgentSync

TOKEN = "agent-token-sha"


def test_a_sync_round_trips(control_plane: Any, make_run_order: Any) -> None:
    control_plane.want(make_run_order("a1", "true"))
    link = ServerLink(control_plane.url, TOKEN)
    reply = link.agent_sync("sha", AgentSync(agent_id="x", capacity={"H100": 8}))
    link.close()
    assert reply.heartbeat_interval_s == 0.05
    assert [(a.attempt_id, a.action, a.command) for a in reply.attempts] == [
        ("a1", "run", ["sh", "-c", "true"])
    ]
    assert control_plane.syncs[0]["capacity"] == {"H100": 8}


@pytest.mark.parametrize(
    ("mode", "token", "error", "match"),
    [
        ("503", TOKEN, UnavailableError, "db down"),
        ("not_leader", TOKEN, NotLeaderError, "no replica leads now"),
        ("drop", TOKEN, UnavailableError, "cannot reach the onecluster server"),
        ("ok", "wrong", AuthError, "bad token"),
        ("garbage", TOKEN, ValidationError, "body this agent cannot read"),
    ],
)
def test_failures_become_platform_errors(
    control_plane: Any, mode: str, token: str, error: type[Exception], match: str
) -> None:
    control_plane.mode = mode
    link = ServerLink(control_plane.url, token)
    with pytest.raises(error, match=match):
        link.agent_sync("sha", AgentSync(agent_id="x"))
    link.close()


def test_an_election_behind_a_replica_gone_is_not_leader_and_keeps_the_live_one(
    control_plane: Any,
) -> None:
    # The leader's host is gone (nothing listens at its URL) and the other replica is electing:
    # the agent hears of the election, not only of an outage, and sticks to the live replica.
    control_plane.mode = "not_leader"
    dead = "http://127.0.0.1:9"
    link = ServerLink(f"{dead},{control_plane.url}", TOKEN, timeout_s=1.0)
    with pytest.raises(NotLeaderError, match="no onecluster server answered"):
        link.agent_sync("sha", AgentSync(agent_id="x"))
    assert link.servers.current == control_plane.url
    control_plane.mode = "503"
    with pytest.raises(UnavailableError) as caught:
        link.agent_sync("sha", AgentSync(agent_id="x"))
    assert not isinstance(caught.value, NotLeaderError)
    link.close()


def test_an_unreachable_server_is_unavailable(control_plane: Any) -> None:
    url = control_plane.url
    control_plane.stop()
    link = ServerLink(url, TOKEN, timeout_s=1.0)
    with pytest.raises(UnavailableError) as caught:
        link.agent_sync("sha", AgentSync(agent_id="x"))
    link.close()
    assert caught.value.hint == "is `onecluster server` running?"


def test_a_failed_sync_changes_nothing_and_resends_the_same_logs(
    control_plane: Any, make_run_order: Any, tmp_path: Path
) -> None:
    backend = LocalBackend("sha", {"H100": 2}, tmp_path)
    agent = Agent("sha", backend, control_plane.url, TOKEN)
    control_plane.want(make_run_order("a1", "echo hi"))
    agent.sync_once()  # starts a1
    deadline = time.monotonic() + 5
    while backend.poll()[0].state is not AttemptState.EXITED:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    control_plane.mode = "503"
    with pytest.raises(UnavailableError):
        agent.sync_once()  # would have carried "hi"
    control_plane.mode = "ok"
    agent.sync_once()
    assert control_plane.syncs[-1]["logs"] == [{"attempt_id": "a1", "offset": 0, "data": "hi\n"}]
    assert control_plane.syncs[-1]["attempts"][0]["exit_code"] == 0
    assert agent.statistics().started == 1
    agent.shutdown()


def test_a_token_that_cannot_be_sent_is_refused_at_once_not_as_an_outage() -> None:
    from onecluster.agent import ServerLink
    from onecluster.errors import AuthError

    with pytest.raises(AuthError, match="malformed"):
        ServerLink("http://127.0.0.1:1", "oc_abc\ndef")
    link = ServerLink("http://127.0.0.1:1", "oc_abc\n")  # a file's newline is dropped
    link.close()

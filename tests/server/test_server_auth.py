"""Tokens and roles: bootstrap, 401 for a bad token, 403 for the wrong role, team or site."""

from __future__ import annotations

import stat
from typing import TYPE_CHECKING

import httpx
import pytest

from onecluster.errors import AuthError, ForbiddenError, NotFoundError
from onecluster.schema import AgentSync, JobSubmit, TokenCreate

if TYPE_CHECKING:
    from conftest import RunningServer

LLM_JOB = JobSubmit(team="llm", gpus=8, duration_s=60.0, command=["true"])


def test_first_start_writes_an_admin_token_readable_by_its_owner_only(
    server: RunningServer,
) -> None:
    path = server.config.state_dir / "admin.token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert server.admin().jobs() == []


def test_missing_or_unknown_tokens_are_401(server: RunningServer) -> None:
    with pytest.raises(AuthError, match="needs a token") as no_token:
        server.client(None).jobs()
    assert type(no_token.value) is AuthError
    with pytest.raises(AuthError, match="not valid"):
        server.client("oc_made_up").jobs()
    r = httpx.get(f"{server.url}/api/v1/jobs", headers={"Authorization": "Basic abc"})
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "unauthorized"
    assert server.client(None).health()["status"] == "ok"


def test_members_act_on_their_own_team_only(server: RunningServer) -> None:
    llm = server.client(server.token(role="member", team="llm"))
    vision = server.client(server.token(role="member", team="vision"))
    mine = llm.submit(LLM_JOB)
    theirs = vision.submit(JobSubmit(team="vision", gpus=8, duration_s=60.0, command=["true"]))
    with pytest.raises(ForbiddenError, match="team llm"):
        llm.submit(JobSubmit(team="vision", gpus=8, duration_s=60.0, command=["true"]))
    assert [j.id for j in llm.jobs()] == [mine.id]
    with pytest.raises(ForbiddenError):
        llm.jobs(team="vision")
    for call in (llm.job, llm.cancel, llm.logs):
        with pytest.raises(ForbiddenError):
            call(theirs.id)
    assert llm.cancel(mine.id).state == "cancelled"
    with pytest.raises(ForbiddenError, match="admin"):
        llm.create_token(TokenCreate(role="admin"))
    with pytest.raises(ForbiddenError):
        llm.gpu_report("2026-05")
    assert [s.name for s in llm.sites()] == ["shanghai", "singapore", "tokyo"]
    assert len(llm.teams()) == 3
    assert llm.stats().pending == 1


def test_agents_sync_their_own_site_only(server: RunningServer) -> None:
    tokyo = server.client(server.token(role="agent", site="tokyo"))
    assert tokyo.agent_sync("tokyo", AgentSync(agent_id="a")).attempts == []
    with pytest.raises(ForbiddenError, match="site shanghai"):
        tokyo.agent_sync("shanghai", AgentSync(agent_id="a"))
    with pytest.raises(ForbiddenError):
        tokyo.submit(LLM_JOB)
    with pytest.raises(ForbiddenError):
        server.admin().agent_sync("tokyo", AgentSync(agent_id="a"))


def test_tokens_are_scoped_to_teams_and_sites_that_exist(server: RunningServer) -> None:
    admin = server.admin()
    with pytest.raises(NotFoundError, match="no team"):
        admin.create_token(TokenCreate(role="member", team="nobody"))
    with pytest.raises(NotFoundError, match="no site"):
        admin.create_token(TokenCreate(role="agent", site="mars"))
    headers = {"Authorization": f"Bearer {server.admin_token}"}
    r = httpx.post(f"{server.url}/api/v1/tokens", json={"role": "member"}, headers=headers)
    assert r.status_code == 400
    assert "needs a team" in r.json()["error"]["message"]
    minted = admin.create_token(TokenCreate(role="admin"))
    assert minted.token.startswith("oc_")
    assert server.client(minted.token).jobs() == []

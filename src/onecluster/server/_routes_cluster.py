"""Cluster routes: health, sites, teams, statistics, tokens and the GPU report."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from onecluster.schema import (
    ErrorOut,
    HealthOut,
    LeaderOut,
    SiteOut,
    StatsOut,
    TeamOut,
    TokenCreate,
    TokenOut,
    WhoAmIOut,
)
from onecluster.server._deps import Caller, Control, Elected
from onecluster.server._leader_view import leader_out

__all__ = ["router"]

router = APIRouter()


@router.get("/healthz", tags=["cluster"])
async def healthz(request: Request) -> HealthOut:
    """Liveness, and whether this replica leads: no token needed; async, so it never queues
    behind the thread pool."""
    election = getattr(request.app.state, "election", None)
    if election is None:
        return HealthOut(status="ok")
    stats = election.statistics()
    return HealthOut(
        status="ok",
        role="leader" if stats.leading else "follower",
        leader=stats.url if stats.leading else stats.leader_url,
        term=stats.term,
    )


@router.get("/api/v1/cluster/leader", tags=["cluster"])
def leader(control: Control, election: Elected, _caller: Caller) -> LeaderOut:
    """Who leads the control plane (from the database), which replica answered, and every
    replica seen in the last ten seconds."""
    return leader_out(control, election)


@router.get("/api/v1/whoami", tags=["cluster"])
async def whoami(caller: Caller) -> WhoAmIOut:
    """Who the token is: its role, and the team or site it is for (any valid token)."""
    return WhoAmIOut(role=caller.role, team=caller.team, site=caller.site, holder=caller.holder)


@router.get("/api/v1/sites", tags=["cluster"])
def sites(control: Control, _caller: Caller) -> list[SiteOut]:
    """Every site, its agent's status and its pools."""
    return control.sites()


@router.get("/api/v1/teams", tags=["cluster"])
def teams(control: Control, _caller: Caller) -> list[TeamOut]:
    """Every team, its quota and its usage."""
    return control.teams()


@router.get("/api/v1/stats", tags=["cluster"])
def stats(control: Control, _caller: Caller) -> StatsOut:
    """A snapshot of the whole cluster."""
    return control.stats()


@router.post(
    "/api/v1/tokens",
    status_code=201,
    tags=["admin"],
    responses={404: {"model": ErrorOut, "description": "There is no such team or site."}},
)
def create_token(body: TokenCreate, control: Control, caller: Caller) -> TokenOut:
    """Mint a token (admin); the secret is in the answer only."""
    caller.require_admin()
    return control.create_token(body)


@router.get("/api/v1/reports/gpu", tags=["admin"])
def gpu_report(
    control: Control, caller: Caller, month: Annotated[str, Query(max_length=16)]
) -> dict[str, Any]:
    """The monthly GPU report per team and site (admin); ``month`` is ``YYYY-MM`` (UTC)."""
    caller.require_admin()
    return control.gpu_report(month)


@router.get("/api/v1/reports/gpu/compare", tags=["admin"])
def gpu_before_after(
    control: Control,
    caller: Caller,
    month: Annotated[str, Query(max_length=16)],
    policy: Annotated[str, Query(max_length=16)] = "separate",
) -> dict[str, Any]:
    """Each team's wait, JCT and GPU-hours with the month's jobs replayed under the one
    queue and under ``policy`` (``separate``: today's per-site queues) (admin)."""
    caller.require_admin()
    return control.gpu_before_after(month, policy)

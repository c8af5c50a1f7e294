"""``GET /jobs/{id}/why`` over a real socket: a pending job's explanation, on the view the
reconcile loop decides on; 404 for an unknown job, 409 naming the state of one not pending,
403 for another team's job."""

from __future__ import annotations

from typing import TYPE_CHECKING, get_args

import httpx
import pytest

from onecluster.errors import ConflictError, ForbiddenError, NotFoundError
from onecluster.scheduler import Verdict
from onecluster.schema import JobSubmit, WhyVerdict

if TYPE_CHECKING:
    from conftest import RunningServer


def job(gpus: int = 8, team: str = "llm") -> JobSubmit:
    return JobSubmit(team=team, gpus=gpus, duration_s=600.0, gpu_types=["H800"], command=["true"])


def test_a_job_that_would_start_now_says_where_then_409_once_it_runs(
    server: RunningServer,
) -> None:
    admin = server.admin()
    server.sync("shanghai")
    submitted = admin.submit(job())
    why = admin.why(submitted.id)
    assert (why.job_id, why.team, why.gpus, why.priority_class) == (
        submitted.id,
        "llm",
        8,
        "normal",
    )
    assert why.verdict == "starts"
    assert [(p.site, p.gpu_type, p.gpus) for p in why.starts] == [("shanghai", "H800", 8)]
    assert why.summary == "starts in this pass on 8 H800 at shanghai"
    assert why.now == server.clock.now()
    # llm's guarantee of H800 holds anywhere; its home is shanghai.
    assert [(g.gpu_type, g.site, g.gpus, g.used) for g in why.guarantee] == [("H800", None, 320, 0)]
    assert why.home_site == "shanghai"
    server.step()
    assert admin.job(submitted.id).state == "running"
    with pytest.raises(ConflictError, match=f"job {submitted.id} is running, not pending"):
        admin.why(submitted.id)


def test_an_owner_reclaims_what_another_team_borrowed(server: RunningServer) -> None:
    admin = server.admin()
    server.sync("shanghai")
    borrowed = admin.submit(job(gpus=384, team="speech"))  # speech's H800 guarantee is 32
    server.step()
    assert admin.job(borrowed.id).borrowed
    owner = admin.submit(job(gpus=8))
    why = admin.why(owner.id)
    assert why.verdict == "reclaims"
    assert [(r.job_id, r.team, r.site, r.gpus) for r in why.reclaims] == [
        (borrowed.id, "speech", "shanghai", 384)
    ]
    assert why.grace_s == 5.0  # the server's stop grace
    assert why.summary == (
        "first in line; within its guarantee it reclaims 384 borrowed GPUs at shanghai "
        "(1 job, 5 s grace) and starts once they have stopped"
    )


def test_a_job_behind_a_full_pool_holds_its_reservation(server: RunningServer) -> None:
    admin = server.admin()
    server.sync("shanghai")
    first = admin.submit(job(gpus=320))
    admin.submit(job(gpus=32, team="speech"))
    server.step()
    started = admin.job(first.id)
    assert started.state == "running" and started.started_at is not None
    waiting = admin.submit(job(gpus=64))
    why = admin.why(waiting.id)
    assert why.verdict == "reserved"
    assert [(r.site, r.gpu_type, r.gpus) for r in why.reserved] == [("shanghai", "H800", 64)]
    assert why.expected_start_at == started.started_at + 600
    [pool] = why.pools
    assert (pool.site, pool.status, pool.gpus, pool.free, pool.borrowed, pool.terms) == (
        "shanghai",
        "up",
        384,
        32,
        0,
        "home",
    )
    assert pool.reserved is not None and pool.reserved.job_id == waiting.id
    assert why.summary == (
        "first in line; needs 64 H800 — at most 32 free at shanghai; beyond its guarantee "
        "(320/320 H800 of its guarantee in use): at its home site shanghai it reclaims GPUs "
        "from teams homed elsewhere, elsewhere it only borrows idle GPUs; the next 64 H800 at "
        "shanghai to free are reserved for it (expected in 10 min)"
    )
    # The explanation changed nothing: the next pass still finds the job pending.
    server.step()
    assert admin.job(waiting.id).state == "pending"


def test_unknown_jobs_are_404_and_other_teams_jobs_403(server: RunningServer) -> None:
    admin = server.admin()
    with pytest.raises(NotFoundError):
        admin.why("j-does-not-exist")
    mine = admin.submit(job())
    vision = server.client(server.token(role="member", team="vision"))
    with pytest.raises(ForbiddenError):
        vision.why(mine.id)
    llm = server.client(server.token(role="member", team="llm"))
    assert llm.why(mine.id).job_id == mine.id
    r = httpx.get(
        f"{server.url}/api/v1/jobs/{mine.id}/why",
        headers={"Authorization": f"Bearer {server.admin_token}"},
    )
    assert r.status_code == 200
    # No agent has synced: every site is down, so the pass has nothing to place.
    assert r.json()["verdict"] == "not_reached"
    assert r.json()["summary"] == (
        "first in line; needs 8 H800 — no site that could run it takes work now; shanghai is down"
    )


def test_a_cancelled_job_is_409_naming_its_state(server: RunningServer) -> None:
    admin = server.admin()
    gone = admin.submit(job())
    admin.cancel(gone.id)
    with pytest.raises(ConflictError, match="is cancelled, not pending") as caught:
        admin.why(gone.id)
    assert caught.value.hint == f"`onecluster jobs {gone.id}` shows where it is"


def test_the_wire_names_every_verdict_of_the_scheduler() -> None:
    assert set(get_args(WhyVerdict)) == set(get_args(Verdict))

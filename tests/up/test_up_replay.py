"""The replay loop and the live view, against an in-memory stand-in for the API."""

from __future__ import annotations

import io

from rich.console import Console

from onecluster.errors import ImpossibleJobError, UnavailableError
from onecluster.schema import JobOut, JobSubmit, PartOut, PoolOut, SiteOut, SiteStatsOut, StatsOut
from onecluster.up._live import ViewState, render_summary, render_view
from onecluster.up._replay import job_events, replay
from onecluster.up._workload import DemoJob, DemoWorkload


def _stats(busy: int = 0, completed: int = 0) -> StatsOut:
    return StatsOut(
        gpus_total=16,
        gpus_busy=busy,
        utilization=busy / 16,
        pending=0,
        running=0,
        completed=completed,
        failed=0,
        cancelled=0,
        preemptions=0,
        mean_wait_s=1.5,
        p95_wait_s=3.0,
        sites={"a": SiteStatsOut(gpus=16, busy=busy, pending=2)},
    )


def _job(
    job_id: str, state: str, *, name: str = "j", team: str = "t1", borrowed: bool = False
) -> JobOut:
    parts = [PartOut(site="a", gpu_type="H100", gpus=4)] if state != "pending" else []
    return JobOut(
        id=job_id,
        name=name,
        team=team,
        state=state,
        gpus=4,
        gpu_types=[],
        duration_s=5,
        dataset=None,
        dataset_bytes=0,
        priority="normal",
        preemptible=False,
        command=["sleep", "5"],
        max_sites=1,
        submitted_at=0.0,
        started_at=1.0 if state != "pending" else None,
        finished_at=None,
        parts=parts,
        borrowed=borrowed,
        attempts=1,
        preemptions=0,
        exit_code=None,
        reason=None,
    )


class FakeApi:
    """Submitted jobs run at once and complete on the next poll; GPUs > 8 are impossible."""

    def __init__(self) -> None:
        self.submitted: list[JobSubmit] = []
        self.polls = 0

    def submit(self, body: JobSubmit) -> JobOut:
        if body.gpus > 8:
            raise ImpossibleJobError(
                f"job {body.name} asks for {body.gpus} GPUs; no pool has that many"
            )
        self.submitted.append(body)
        return _job(str(len(self.submitted)), "pending", name=body.name, team=body.team)

    def stats(self) -> StatsOut:
        return _stats(busy=4 * len(self.submitted) % 17, completed=len(self.submitted))

    def jobs(self, *, limit: int = 100) -> list[JobOut]:
        self.polls += 1
        return [
            _job(str(i + 1), "completed" if self.polls % 2 == 0 else "running", name=b.name)
            for i, b in enumerate(self.submitted)
        ]

    def sites(self) -> list[SiteOut]:
        return [
            SiteOut(
                name="a",
                region="r",
                jurisdiction="X",
                backend="local",
                status="up",
                last_heartbeat=0.0,
                pools=[PoolOut(gpu_type="H100", count=16, cost_per_gpu_hour=1.0, used=4)],
            )
        ]


class VirtualTime:
    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.now += seconds


def test_replay_submits_each_job_at_its_time_with_its_team_token() -> None:
    api_t1, api_t2, admin = FakeApi(), FakeApi(), FakeApi()
    workload = DemoWorkload(
        source="test",
        gpu_factor=1,
        jobs=(
            DemoJob(at_s=0.0, name="first", team="t1", gpus=4, run_s=2.0),
            DemoJob(at_s=1.2, name="second", team="t2", gpus=2, run_s=1.0),
            DemoJob(at_s=2.0, name="huge", team="t1", gpus=64, run_s=1.0),
            DemoJob(at_s=2.5, name="orphan", team="nobody", gpus=1, run_s=1.0),
        ),
    )
    time_ = VirtualTime()
    views: list[ViewState] = []
    submitted_at: dict[str, float] = {}

    class Recording(FakeApi):
        def __init__(self, inner: FakeApi) -> None:
            self.inner = inner

        def submit(self, body: JobSubmit) -> JobOut:
            submitted_at[body.name] = time_.now
            return self.inner.submit(body)

    result = replay(
        workload,
        fabric_name="f",
        duration_s=4.0,
        admin=admin,  # type: ignore[arg-type]
        members={"t1": Recording(api_t1), "t2": Recording(api_t2)},  # type: ignore[dict-item]
        show=views.append,
        refresh_s=0.5,
        clock=time_.clock,
        sleep=time_.sleep,
    )
    assert submitted_at == {"first": 0.0, "second": 1.2, "huge": 2.0}
    assert [b.name for b in api_t1.submitted] == ["first"]
    assert [b.command for b in api_t2.submitted] == [["sleep", "1.0"]]
    assert (result.submitted, result.rejected) == (2, 2)
    assert views[-1].elapsed_s >= 4.0
    assert views[-1].submitted == 2 and views[-1].to_submit == 4
    events = "\n".join(views[-1].events)
    assert "refused   huge" in events and "no pool has that many" in events
    assert "no member token for team nobody" in events
    assert result.mean_utilization is not None


def test_job_events_report_each_state_change_once() -> None:
    states, events = job_events(
        {}, [_job("1", "running", name="a", borrowed=True), _job("2", "pending")]
    )
    assert events == ["started   a [t1] on a H100×4 (borrowed)"]
    states, events = job_events(states, [_job("1", "completed", name="a"), _job("2", "pending")])
    assert events == ["completed a [t1]"]
    _, events = job_events(states, [_job("1", "completed", name="a")])
    assert events == []


def test_live_view_and_summary_render_the_figures() -> None:
    view = ViewState(
        fabric="three-site",
        elapsed_s=12.3,
        duration_s=90,
        submitted=5,
        to_submit=54,
        stats=_stats(busy=8, completed=3),
        sites=tuple(FakeApi().sites()),
        events=("submitted x [t1] 4 GPUs, 5s",),
    )
    out = io.StringIO()
    console = Console(file=out, width=120, color_system=None)
    console.print(render_view(view))
    console.print(render_summary(_stats(busy=8, completed=3), mean_utilization=0.42))
    text = out.getvalue()
    assert "fabric three-site" in text and "12s / 90s" in text and "submitted 5/54" in text
    assert "4/16" in text  # busy/total of site a
    assert "completed 3" in text
    assert "submitted x [t1]" in text
    assert "42.0%" in text and "p95 queue wait" in text and "3.0s" in text


_SENT = ((0.0, "lost"), (0.5, "next"))


def test_a_submission_without_an_answer_is_an_event_and_not_sent_again() -> None:
    admin, api = FakeApi(), FakeApi()

    class LostMidRequest(FakeApi):
        calls = 0

        def submit(self, body: JobSubmit) -> JobOut:
            self.calls += 1
            if body.name == "lost":
                raise UnavailableError(
                    "POST /api/v1/jobs was sent to the onecluster server at http://a, which "
                    "gave no answer; whether it was done is unknown"
                )
            return api.submit(body)

    member = LostMidRequest()
    jobs = [DemoJob(at_s=at, name=name, team="t1", gpus=4, run_s=1.0) for at, name in _SENT]
    workload = DemoWorkload(source="test", gpu_factor=1, jobs=tuple(jobs))
    time_ = VirtualTime()
    views: list[ViewState] = []
    result = replay(
        workload,
        fabric_name="f",
        duration_s=2.0,
        admin=admin,  # type: ignore[arg-type]
        members={"t1": member},  # type: ignore[dict-item]
        show=views.append,
        clock=time_.clock,
        sleep=time_.sleep,
    )
    assert (result.submitted, result.rejected, result.unanswered) == (1, 0, 1)
    assert member.calls == 2  # the lost one was not sent again
    assert any(e.startswith("no answer lost [t1]: POST") for e in views[-1].events)

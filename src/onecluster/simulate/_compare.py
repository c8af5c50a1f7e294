"""Before and after, per team: what each team gets under one policy against another (the
admin's answer to "would anyone lose by joining the one queue?")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from onecluster.simulate._result import SimResult

__all__ = ["MIN_JOBS", "TeamComparison", "compare_teams"]

#: Teams with fewer jobs than this are shown but never judged: their means are noise.
MIN_JOBS = 100
#: A team loses when it waits more than this many times its baseline wait …
LOSS_RATIO = 1.1
#: … plus this many seconds (the preemption grace and a scheduling pass fit in it).
LOSS_SLACK_S = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TeamComparison:
    """One team under ``result`` (``*``) and under ``baseline`` (``*_base``)."""

    team: str
    jobs: int
    wait_s: float
    wait_base_s: float
    jct_s: float
    jct_base_s: float
    gpu_h: float
    gpu_h_base: float
    preemptions: int

    @property
    def judged(self) -> bool:
        """Whether the team has jobs enough for its means to count."""
        return self.jobs >= MIN_JOBS

    @property
    def loses(self) -> bool:
        """Whether it waits longer than ``LOSS_RATIO`` × its baseline wait + ``LOSS_SLACK_S``."""
        return self.judged and self.wait_s > LOSS_RATIO * self.wait_base_s + LOSS_SLACK_S

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TeamComparison:
        """Read back :meth:`to_json`'s output (``loses`` is recomputed)."""
        return cls(
            team=str(data["team"]),
            jobs=int(data["jobs"]),
            wait_s=float(data["wait_s"]),
            wait_base_s=float(data["wait_base_s"]),
            jct_s=float(data["jct_s"]),
            jct_base_s=float(data["jct_base_s"]),
            gpu_h=float(data["gpu_h"]),
            gpu_h_base=float(data["gpu_h_base"]),
            preemptions=int(data["preemptions"]),
        )

    def to_json(self) -> dict[str, object]:
        """Plain, rounded data."""
        return {
            "team": self.team,
            "jobs": self.jobs,
            "wait_s": round(self.wait_s, 1),
            "wait_base_s": round(self.wait_base_s, 1),
            "jct_s": round(self.jct_s, 1),
            "jct_base_s": round(self.jct_base_s, 1),
            "gpu_h": round(self.gpu_h, 1),
            "gpu_h_base": round(self.gpu_h_base, 1),
            "preemptions": self.preemptions,
            "loses": self.loses,
        }


def compare_teams(result: SimResult, baseline: SimResult) -> tuple[TeamComparison, ...]:
    """Every team of either run, most jobs first."""
    rows = []
    for team in sorted(set(result.teams) | set(baseline.teams)):
        a, b = result.teams.get(team), baseline.teams.get(team)
        rows.append(
            TeamComparison(
                team=team,
                jobs=max(a.jobs if a else 0, b.jobs if b else 0),
                wait_s=a.mean_wait_s if a else 0.0,
                wait_base_s=b.mean_wait_s if b else 0.0,
                jct_s=a.mean_jct_s if a else 0.0,
                jct_base_s=b.mean_jct_s if b else 0.0,
                gpu_h=a.gpu_s / 3600 if a else 0.0,
                gpu_h_base=b.gpu_s / 3600 if b else 0.0,
                preemptions=a.preemptions if a else 0,
            )
        )
    rows.sort(key=lambda r: (-r.jobs, r.team))
    return tuple(rows)

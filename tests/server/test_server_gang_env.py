"""The gang part of an attempt's environment (pure): what ``desired_attempt`` tells each
attempt of a run about the others."""

from __future__ import annotations

from onecluster.model import gang_port
from onecluster.server._views import desired_attempt, gang_env
from onecluster.store import Assignment, GangMember

GANG = (
    GangMember(site="tokyo", address="10.0.0.3", gpus=12),
    GangMember(site="shanghai", address=None, gpus=2),
    GangMember(site="singapore", address="10.0.0.2", gpus=4),
)


def assignment(site: str, gpus: int, gang: tuple[GangMember, ...] = GANG) -> Assignment:
    return Assignment(
        attempt_id=f"j-1.1.{site}",
        job_id="j-1",
        site=site,
        action="run",
        command=("train",),
        gpu_type="H100",
        gpus=gpus,
        reason=None,
        gang=gang,
    )


def test_every_site_learns_the_same_gang_and_its_own_rank() -> None:
    envs = [gang_env(assignment(m.site, m.gpus)) for m in GANG]
    assert [e.pop("ONECLUSTER_GANG_RANK") for e in envs] == ["0", "1", "2"]
    assert (
        envs[0]
        == envs[1]
        == envs[2]
        == {
            "ONECLUSTER_GANG_SITES": "tokyo,shanghai,singapore",
            "ONECLUSTER_GANG_ADDRESSES": "tokyo=10.0.0.3,singapore=10.0.0.2",
            "ONECLUSTER_GANG_GPUS": "tokyo=12,shanghai=2,singapore=4",
            "ONECLUSTER_GANG_PORT": str(gang_port("j-1")),
        }
    )


def test_an_assignment_without_its_own_site_in_the_gang_is_a_gang_of_itself() -> None:
    for gang in ((), GANG[:1]):
        env = gang_env(assignment("singapore", 4, gang))
        assert (env["ONECLUSTER_GANG_SITES"], env["ONECLUSTER_GANG_RANK"]) == ("singapore", "0")
        assert (env["ONECLUSTER_GANG_GPUS"], env["ONECLUSTER_GANG_ADDRESSES"]) == (
            "singapore=4",
            "",
        )


def test_the_reply_carries_the_gang_beside_the_attempt_own_variables() -> None:
    order = desired_attempt(assignment("shanghai", 2), grace_s=5.0)
    assert order.env["ONECLUSTER_SITE"] == "shanghai"
    assert order.env["ONECLUSTER_GANG_RANK"] == "1"
    assert "ONECLUSTER_DATASET_DIR" not in order.env

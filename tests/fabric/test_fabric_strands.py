"""What a change of fabric would strand: running attempts on a site or pool removed or shrunk
under them, teams with jobs, pending jobs made impossible, transfers on what goes away."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from onecluster.errors import ConflictError
from onecluster.fabric import (
    ActiveAttempt,
    ActiveTransfer,
    PendingWork,
    Workload,
    load_fabric,
    refusal,
    stranded,
)
from onecluster.model import Circuit, Fabric, GpuPool, Site

ROOT = Path(__file__).resolve().parents[2]
THREE = load_fabric(ROOT / "examples" / "fabrics" / "three-site.yaml")


def _attempt(job: str, site: str, gpu_type: str, gpus: int, team: str = "speech") -> ActiveAttempt:
    return ActiveAttempt(
        attempt_id=f"{job}.1.0", job_id=job, team=team, site=site, gpu_type=gpu_type, gpus=gpus
    )


def _without_site(fabric: Fabric, name: str) -> Fabric:
    """``fabric`` less site ``name`` and everything that names it (teams rehomed)."""
    keep = next(s.name for s in fabric.sites if s.name != name)
    return replace(
        fabric,
        sites=tuple(s for s in fabric.sites if s.name != name),
        circuits=tuple(c for c in fabric.circuits if name not in (c.a, c.b)),
        teams=tuple(
            replace(t, home_site=keep, quota=None) if t.home_site == name else t
            for t in fabric.teams
        ),
        datasets=tuple(
            replace(d, sites=d.sites - {name}) for d in fabric.datasets if d.sites - {name}
        ),
        objectives=tuple(o for o in fabric.objectives if name not in (o.a, o.b)),
    )


def _with_pool(fabric: Fabric, site: str, gpu_type: str, count: int | None) -> Fabric:
    """``fabric`` with pool ``site/gpu_type`` set to ``count`` GPUs (``None``: removed, and
    quotas for a type no site has any more dropped)."""
    sites = []
    for s in fabric.sites:
        pools = s.pools
        if s.name == site:
            pools = tuple(p for p in s.pools if p.gpu_type != gpu_type)
            if count is not None:
                pools += (GpuPool(gpu_type=gpu_type, count=count),)
        sites.append(replace(s, pools=pools))
    types = {p.gpu_type for s in sites for p in s.pools}
    teams = tuple(
        t if t.quota is None else replace(t, quota={k: v for k, v in t.quota.items() if k in types})
        for t in fabric.teams
    )
    return replace(fabric, sites=tuple(sites), teams=teams)


def test_adding_a_site_and_a_pool_while_work_runs_strands_nothing() -> None:
    osaka = Site(
        name="osaka", region="r", jurisdiction="JP", pools=(GpuPool(gpu_type="H200", count=64),)
    )
    grown = replace(
        _with_pool(THREE, "tokyo", "B200", 16),
        sites=(*_with_pool(THREE, "tokyo", "B200", 16).sites, osaka),
        circuits=(
            *THREE.circuits,
            Circuit(name="x", a="tokyo", b="osaka", capacity_gbps=1, rtt_ms=1),
        ),
    )
    work = Workload(
        attempts=(_attempt("j-1", "tokyo", "H100", 192),),
        pending=(PendingWork(job_id="j-2", team="llm", gpus=8, gpu_types=("H800",)),),
        transfers=(ActiveTransfer(transfer_id="t-1", src="shanghai", dst="tokyo"),),
    )
    assert stranded(THREE, grown, work) == ()


def test_removing_a_site_with_running_attempts_is_refused_naming_them() -> None:
    work = Workload(
        attempts=(_attempt("j-1", "tokyo", "L40S", 8), _attempt("j-2", "tokyo", "H100", 4))
    )
    [strand] = stranded(THREE, _without_site(THREE, "tokyo"), work)
    assert strand.subject == "site tokyo"
    assert strand.ids == ("j-1", "j-2")
    assert "j-1.1.0 (8 L40S, job j-1)" in strand.reason
    assert "`onecluster drain tokyo`" in strand.reason
    # The same site, idle: nothing to strand.
    assert stranded(THREE, _without_site(THREE, "tokyo"), Workload()) == ()


def test_a_pool_removed_or_shrunk_below_its_use_is_refused_but_not_one_that_still_fits() -> None:
    work = Workload(
        attempts=(_attempt("j-1", "tokyo", "L40S", 64), _attempt("j-2", "tokyo", "L40S", 32))
    )
    [gone] = stranded(THREE, _with_pool(THREE, "tokyo", "L40S", None), work)
    assert gone.subject == "pool tokyo/L40S"
    assert "pool tokyo/L40S is removed but 2 attempt(s) hold 96 of its GPUs" in gone.reason
    assert "`onecluster drain tokyo --pool L40S`" in gone.reason
    [shrunk] = stranded(THREE, _with_pool(THREE, "tokyo", "L40S", 90), work)
    assert "pool tokyo/L40S shrinks to 90 GPUs but 96 are in use" in shrunk.reason
    assert stranded(THREE, _with_pool(THREE, "tokyo", "L40S", 96), work) == ()


def test_a_pool_already_over_its_count_does_not_block_an_unrelated_change() -> None:
    # Running beyond the pool's count (the fabric shrank under a race): not this change's doing.
    small = _with_pool(THREE, "tokyo", "L40S", 8)
    work = Workload(attempts=(_attempt("j-1", "tokyo", "L40S", 16),))
    assert stranded(small, replace(small, name="renamed"), work) == ()


def test_a_team_with_jobs_cannot_be_removed() -> None:
    without = replace(THREE, teams=tuple(t for t in THREE.teams if t.name != "vision"))
    work = Workload(
        attempts=(_attempt("j-1", "singapore", "H100", 8, team="vision"),),
        pending=(PendingWork(job_id="j-2", team="vision", gpus=8),),
    )
    [strand] = stranded(THREE, without, work)
    assert strand.subject == "team vision"
    assert "running job(s) j-1 and pending job(s) j-2" in strand.reason
    assert stranded(THREE, without, Workload()) == ()


def test_a_pending_job_left_without_its_only_gpu_type_or_room_is_named() -> None:
    no_l40s = _with_pool(THREE, "tokyo", "L40S", None)
    only = PendingWork(job_id="j-1", team="speech", gpus=8, gpu_types=("L40S",))
    either = PendingWork(job_id="j-2", team="speech", gpus=8, gpu_types=("L40S", "H100"))
    [strand] = stranded(THREE, no_l40s, Workload(pending=(only, either)))
    assert strand.ids == ("j-1",)
    assert "no site has GPUs of the types it accepts (L40S)" in strand.reason
    big = PendingWork(job_id="j-3", team="speech", gpus=100, gpu_types=("L40S",))
    [strand] = stranded(THREE, _with_pool(THREE, "tokyo", "L40S", 64), Workload(pending=(big,)))
    assert "it asks for 100 GPUs and at most 64 of its types fit in one site" in strand.reason


def test_a_pending_job_whose_declared_dataset_goes_is_named_unless_it_is_registered() -> None:
    without = replace(THREE, datasets=THREE.datasets[:2])
    job = PendingWork(job_id="j-1", team="speech", gpus=8, dataset="speech-ja-10k")
    [strand] = stranded(THREE, without, Workload(pending=(job,)))
    assert "its dataset speech-ja-10k is neither declared" in strand.reason
    registered = Workload(pending=(job,), registered=frozenset({"speech-ja-10k"}))
    assert stranded(THREE, without, registered) == ()


def test_transfers_pin_their_sites_and_the_circuits_they_use() -> None:
    moving = Workload(
        transfers=(
            ActiveTransfer(
                transfer_id="t-1", src="shanghai", dst="tokyo", circuits=frozenset({"sha-tyo"})
            ),
        )
    )
    without_circuit = replace(
        THREE, circuits=tuple(c for c in THREE.circuits if c.name != "sha-tyo")
    )
    [strand] = stranded(THREE, without_circuit, moving)
    assert (strand.subject, strand.ids) == ("circuit sha-tyo", ("t-1",))
    subjects = [s.subject for s in stranded(THREE, _without_site(THREE, "tokyo"), moving)]
    assert subjects == ["site tokyo", "circuit sha-tyo"]


def test_the_refusal_is_a_conflict_that_says_what_to_do() -> None:
    work = Workload(attempts=tuple(_attempt(f"j-{i}", "tokyo", "L40S", 1) for i in range(8)))
    error = refusal(stranded(THREE, _without_site(THREE, "tokyo"), work))
    assert isinstance(error, ConflictError)
    assert error.message.startswith("the new fabric would strand work: site tokyo is removed")
    assert "and 3 more" in error.message
    assert error.hint is not None and "onecluster drain SITE" in error.hint


@given(st.lists(st.integers(1, 64), max_size=6), st.integers(1, 400))
def test_a_pool_may_shrink_exactly_down_to_what_runs_there(sizes: list[int], count: int) -> None:
    work = Workload(
        attempts=tuple(_attempt(f"j-{i}", "tokyo", "L40S", g) for i, g in enumerate(sizes))
    )
    held = sum(sizes)
    found = stranded(THREE, _with_pool(THREE, "tokyo", "L40S", count), work)
    assert bool(found) == (count < held and count < 112)
    if found:
        assert set(found[0].ids) == {f"j-{i}" for i in range(len(sizes))}


def test_nothing_stranded_by_an_unchanged_fabric() -> None:
    work = Workload(attempts=(_attempt("j-1", "tokyo", "L40S", 8),))
    assert stranded(THREE, THREE, work) == ()

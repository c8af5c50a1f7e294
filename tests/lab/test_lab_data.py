"""Datasets in the three-site lab (root, slow): a push arrives bit for bit over every path at
once; a push survives the crash of its receiving agent without fetching a verified chunk
again; a push whose direct circuits are cut finishes through Tokyo; a changed dataset sends
only its changed chunks; a job placed away from its data waits for it, then runs with it.

Every push and prefetch carries data *into* Shanghai (or between Singapore and Tokyo), never
out of it: Shanghai controls exports, and an export needs an approval.

Circuits run at the lab's default scale (5 %: 50 Mbit/s for a 1 Gbit/s circuit), so a few
tens of megabytes take seconds."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.lab.conftest import needs_lab_host, running_lab, wait_for

from onecluster.client import Client
from onecluster.lab import Lab
from onecluster.schema import DatasetAdd, JobSubmit, PushIn, TransferOut

pytestmark = [pytest.mark.lab, pytest.mark.slow, needs_lab_host]


@pytest.fixture(scope="module")
def lab_and_admin() -> Iterator[tuple[Lab, Client]]:
    with running_lab() as both:
        yield both


@pytest.fixture(scope="module")
def lab(lab_and_admin: tuple[Lab, Client]) -> Lab:
    return lab_and_admin[0]


@pytest.fixture(scope="module")
def admin(lab_and_admin: tuple[Lab, Client]) -> Client:
    return lab_and_admin[1]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("datasets")


def make_tree(top: Path, *, big: int, seed: int) -> Path:
    """``big`` files of 4 MB and 200 small ones (an image dataset's shape)."""
    rng = random.Random(seed)
    (top / "shards").mkdir(parents=True)
    (top / "small").mkdir()
    for i in range(big):
        (top / "shards" / f"{i:03}.bin").write_bytes(rng.randbytes(4_000_000))
    for i in range(200):
        (top / "small" / f"{i:03}.jpg").write_bytes(rng.randbytes(rng.randint(1000, 8000)))
    return top


def tree_of(top: Path) -> dict[str, bytes]:
    return {str(p.relative_to(top)): p.read_bytes() for p in sorted(top.rglob("*")) if p.is_file()}


def register(admin: Client, name: str, site: str, tree: Path) -> str:
    scan = admin.add_dataset(DatasetAdd(name=name, site=site, path=str(tree)))
    wait_for(lambda: admin.scan(scan.id).state in ("done", "failed"), 60, f"scan of {name}")
    done = admin.scan(scan.id)
    assert done.state == "done" and done.root is not None, done.error
    return done.root


def push(admin: Client, name: str, to: str) -> TransferOut:
    return admin.push(PushIn.model_validate({"dataset": name, "to": to}))


def finished(admin: Client, transfer_id: str, timeout: float = 180) -> TransferOut:
    wait_for(
        lambda: admin.transfer(transfer_id).state in ("done", "failed", "cancelled"),
        timeout,
        f"transfer {transfer_id}",
    )
    out = admin.transfer(transfer_id)
    assert out.state == "done", out.error
    return out


def replica_at(admin: Client, name: str, site: str) -> Path:
    def found() -> bool:
        version = admin.dataset(name).versions[0]
        return any(r.site == site and r.state == "complete" for r in version.replicas)

    wait_for(found, 20, f"{name}'s replica at {site}")
    version = admin.dataset(name).versions[0]
    [replica] = [r for r in version.replicas if r.site == site]
    assert replica.path is not None
    return Path(replica.path)


def test_1_a_push_arrives_bit_for_bit_over_both_circuits_and_the_relay(
    admin: Client, data: Path
) -> None:
    tree = make_tree(data / "corpus", big=8, seed=1)
    register(admin, "corpus", "singapore", tree)
    transfer = push(admin, "corpus", "shanghai")
    assert {p.name for p in transfer.paths} == {"sha-sin-hk", "sha-sin-tw", "sha-tyo+sin-tyo"}
    done = finished(admin, transfer.id)
    assert tree_of(replica_at(admin, "corpus", "shanghai")) == tree_of(tree)
    assert done.chunks_sent == done.chunks_total
    carried = {p.name: p.bytes for p in done.paths}
    assert all(carried.get(name, 0) > 0 for name in ("sha-sin-hk", "sha-sin-tw")), carried


def test_2_a_crashed_receiver_resumes_without_fetching_a_verified_chunk_again(
    lab: Lab, admin: Client, data: Path
) -> None:
    tree = make_tree(data / "big", big=15, seed=2)
    register(admin, "big", "tokyo", tree)
    transfer = push(admin, "big", "shanghai")
    wait_for(
        lambda: admin.transfer(transfer.id).bytes_done > 0.3 * transfer.bytes_total,
        120,
        "a third of the push",
    )
    lab.site_down("shanghai")  # SIGKILL: the agent and its data plane die mid-transfer
    at_kill = admin.transfer(transfer.id)
    lab.site_up("shanghai")
    done = finished(admin, transfer.id)
    assert tree_of(replica_at(admin, "big", "shanghai")) == tree_of(tree)
    # The new agent fetched only what was not verified before the crash (its report of
    # the moment before is a lower bound; a couple of chunks may have been in flight).
    assert done.chunks_sent <= done.chunks_total - at_kill.chunks_done + 4, (at_kill, done)


def test_3_a_push_whose_direct_circuits_are_cut_finishes_through_tokyo(
    lab: Lab, admin: Client, data: Path
) -> None:
    tree = make_tree(data / "detour", big=12, seed=3)
    register(admin, "detour", "singapore", tree)
    transfer = push(admin, "detour", "shanghai")
    wait_for(
        lambda: admin.transfer(transfer.id).bytes_done > 0.2 * transfer.bytes_total,
        120,
        "a fifth of the push",
    )
    relay = "sha-tyo+sin-tyo"
    before = {p.name: p.bytes for p in admin.transfer(transfer.id).paths}.get(relay, 0)
    assert lab.cut("shanghai", "singapore") == ["sha-sin-hk", "sha-sin-tw"]
    try:
        done = finished(admin, transfer.id)
        assert tree_of(replica_at(admin, "detour", "shanghai")) == tree_of(tree)
        after = {p.name: p.bytes for p in done.paths}
        assert set(after) == {relay} or after.get(relay, 0) > before, after
    finally:
        lab.heal("shanghai", "singapore")


def test_4_a_changed_dataset_sends_only_what_changed(admin: Client, data: Path) -> None:
    tree = data / "corpus"
    shard = tree / "shards" / "003.bin"
    raw = shard.read_bytes()
    shard.write_bytes(raw[:2_000_000] + b"an insertion in the middle" + raw[2_000_000:])
    (tree / "small" / "007.jpg").write_bytes(b"a new picture")
    register(admin, "corpus", "singapore", tree)
    done = finished(admin, push(admin, "corpus", "shanghai").id)
    assert tree_of(replica_at(admin, "corpus", "shanghai")) == tree_of(tree)
    assert done.bytes_local > 0.8 * done.bytes_total
    assert done.chunks_sent <= 4  # the chunk or two around the insertion, and the new file
    assert done.bytes_sent < 0.2 * done.bytes_total


def test_5_a_job_placed_away_from_its_data_waits_for_it_then_runs_with_it(
    admin: Client, data: Path
) -> None:
    tree = make_tree(data / "train", big=3, seed=5)
    (tree / "hello.txt").write_text("hello from singapore\n")
    register(admin, "train", "singapore", tree)
    job = admin.submit(
        JobSubmit(
            team="llm",
            gpus=8,
            duration_s=60.0,
            gpu_types=["H800"],  # only Shanghai has them; the data is in Singapore
            dataset="train",
            command=["sh", "-c", "cat $ONECLUSTER_DATASET_DIR/hello.txt"],
        )
    )
    wait_for(lambda: admin.job(job.id).state != "pending", 30, "placement")
    waiting = admin.job(job.id)
    assert waiting.reason is not None and waiting.reason.startswith("waiting for data"), waiting
    wait_for(lambda: admin.job(job.id).state in ("completed", "failed"), 180, "the job")
    ended = admin.job(job.id)
    assert (ended.state, ended.exit_code) == ("completed", 0), ended.reason
    assert "hello from singapore" in admin.logs(job.id).data
    [prefetch] = [t for t in admin.transfers(state="all") if t.job_id == job.id]
    assert prefetch.state == "done" and prefetch.dst == ended.parts[0].site == "shanghai"
    assert prefetch.src == "singapore"

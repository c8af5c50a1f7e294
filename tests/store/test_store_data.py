"""Datasets through the store: scans make versions and replicas, pushes make transfers, and
the data part of a sync is level-triggered and idempotent."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from onecluster.errors import ConflictError, NotFoundError
from onecluster.store import (
    DataSync,
    PathSample,
    ReplicaHeld,
    ScanProgress,
    Store,
    SyncReport,
    TransferProgress,
)

ROOT = "a" * 64
OTHER = "b" * 64
GB = 10**9


def as_given(sites: Sequence[str]) -> Sequence[str]:
    return sites


def synced(store: Store, site: str, now: float = 0.0) -> None:
    """The site's agent synced once (its row exists)."""
    store.sync(site, SyncReport(agent_id=f"agent-{site}"), now=now)


def scanned(store: Store, root: str = ROOT, *, site: str = "tokyo", now: float = 1.0) -> str:
    """Dataset ``ds`` scanned at ``site``: its version ``root``, complete there."""
    synced(store, site)
    scan = store.add_scan("ds", site, "/data/ds", now=now)
    done = ScanProgress(
        id=scan.id, state="done", bytes_done=GB, bytes_total=GB, root=root, files=3, chunks=800
    )
    store.record_data(site, DataSync(scans=(done,)), now=now + 1)
    return scan.id


def test_a_scan_is_queued_once_and_listed_for_its_site(store: Store) -> None:
    first = store.add_scan("ds", "tokyo", "/data/ds", now=1.0)
    again = store.add_scan("ds", "tokyo", "/data/ds", now=2.0)
    assert again == first
    assert (first.state, first.dataset, first.site, first.path) == (
        "queued",
        "ds",
        "tokyo",
        "/data/ds",
    )
    assert [s.id for s in store.data_work("tokyo").scans] == [first.id]
    assert store.data_work("singapore").scans == ()
    [dataset] = store.datasets()
    assert (dataset.name, dataset.versions, dataset.latest) == ("ds", (), None)


def test_scan_progress_then_done_records_a_new_version_and_a_complete_replica(
    store: Store,
) -> None:
    synced(store, "tokyo")
    scan = store.add_scan("ds", "tokyo", "/data/ds", now=1.0)
    progress = ScanProgress(
        id=scan.id, state="scanning", files_done=1, bytes_done=10, files_total=3, bytes_total=GB
    )
    store.record_data("tokyo", DataSync(scans=(progress,)), now=2.0)
    seen = store.scan(scan.id)
    assert (seen.state, seen.files_done, seen.bytes_done, seen.bytes_total) == (
        "scanning",
        1,
        10,
        GB,
    )
    done = ScanProgress(id=scan.id, state="done", bytes_done=GB, root=ROOT, files=3, chunks=800)
    work = store.record_data("tokyo", DataSync(scans=(done,)), now=3.0)
    assert work.scans == ()  # no longer asked for
    seen = store.scan(scan.id)
    assert (seen.state, seen.root, seen.new_version, seen.finished_at) == ("done", ROOT, True, 3.0)
    dataset = store.dataset("ds")
    assert dataset is not None and dataset.latest is not None
    version = dataset.latest
    assert (version.root, version.bytes, version.files, version.chunks, version.site) == (
        ROOT,
        GB,
        3,
        800,
        "tokyo",
    )
    [replica] = version.replicas
    assert (replica.site, replica.state, replica.bytes_present, replica.path) == (
        "tokyo",
        "complete",
        GB,
        "/data/ds",
    )
    # The agent repeats its report, listing the replica now as it holds it: nothing changes.
    held = ReplicaHeld(dataset="ds", root=ROOT, state="complete", bytes_present=GB, path="/data/ds")
    store.record_data("tokyo", DataSync(scans=(done,), replicas=(held,)), now=9.0)
    assert store.scan(scan.id) == seen
    assert store.dataset("ds") == dataset


def test_rescanning_known_content_is_not_a_new_version(store: Store) -> None:
    scanned(store)
    second = store.add_scan("ds", "tokyo", "/data/ds", now=5.0)
    done = ScanProgress(id=second.id, state="done", bytes_done=GB, root=ROOT)
    store.record_data("tokyo", DataSync(scans=(done,)), now=6.0)
    assert store.scan(second.id).new_version is False
    dataset = store.dataset("ds")
    assert dataset is not None and [v.root for v in dataset.versions] == [ROOT]


def test_a_failed_scan_keeps_its_error_and_a_done_one_without_a_root_fails(store: Store) -> None:
    synced(store, "tokyo")
    a = store.add_scan("ds", "tokyo", "/data/a", now=1.0)
    b = store.add_scan("ds", "tokyo", "/data/b", now=1.0)
    reports = (
        ScanProgress(id=a.id, state="failed", error="/data/a: no such directory"),
        ScanProgress(id=b.id, state="done"),
    )
    store.record_data("tokyo", DataSync(scans=reports), now=2.0)
    assert (store.scan(a.id).state, store.scan(a.id).error) == (
        "failed",
        "/data/a: no such directory",
    )
    assert store.scan(b.id).state == "failed"
    assert "without a version" in (store.scan(b.id).error or "")


def test_reports_of_unknown_or_foreign_scans_change_nothing(store: Store) -> None:
    synced(store, "singapore")
    scan = store.add_scan("ds", "tokyo", "/data/ds", now=1.0)
    foreign = ScanProgress(id=scan.id, state="done", root=ROOT, bytes_done=GB)
    unknown = ScanProgress(id="s-nosuch", state="done", root=ROOT, bytes_done=GB)
    store.record_data("singapore", DataSync(scans=(foreign, unknown)), now=2.0)
    assert store.scan(scan.id) == scan
    dataset = store.dataset("ds")
    assert dataset is not None and dataset.versions == ()


def test_an_unknown_scan_is_not_found(store: Store) -> None:
    with pytest.raises(NotFoundError, match="there is no scan s-nosuch"):
        store.scan("s-nosuch")


def test_replicas_are_level_triggered_per_site(store: Store) -> None:
    scanned(store)
    synced(store, "singapore")
    partial = ReplicaHeld(
        dataset="ds", root=ROOT, state="partial", bytes_present=GB // 2, path="/d/ds"
    )
    unknown = ReplicaHeld(dataset="ds", root=OTHER, state="complete", bytes_present=1, path="/x")
    store.record_data("singapore", DataSync(replicas=(partial, unknown)), now=5.0)
    dataset = store.dataset("ds")
    assert dataset is not None and dataset.latest is not None
    assert {(r.site, r.state, r.bytes_present) for r in dataset.latest.replicas} == {
        ("tokyo", "complete", GB),
        ("singapore", "partial", GB // 2),
    }
    assert [v.root for v in dataset.versions] == [ROOT]  # a replica makes no version
    # The same list again changes nothing, not even the time it was last updated.
    store.record_data("singapore", DataSync(replicas=(partial,)), now=6.0)
    assert store.dataset("ds") == dataset
    # A data report without it: gone at singapore, and only there.
    store.record_data("singapore", DataSync(), now=7.0)
    dataset = store.dataset("ds")
    assert dataset is not None and dataset.latest is not None
    assert [r.site for r in dataset.latest.replicas] == ["tokyo"]
    # No data report at all (an agent without a data plane): nothing changes.
    store.record_data("tokyo", None, now=8.0)
    assert store.dataset("ds") == dataset


def test_the_data_endpoint_is_kept_and_listed_while_the_site_is_up(store: Store) -> None:
    synced(store, "tokyo")
    synced(store, "singapore")
    store.record_data("tokyo", DataSync(address="10.0.0.3", port=7400), now=1.0)
    work = store.data_work("singapore")
    assert [(e.site, e.address, e.port) for e in work.endpoints] == [("tokyo", "10.0.0.3", 7400)]
    store.expire_sites(now=1000.0)
    assert store.data_work("singapore").endpoints == ()


def test_push_refuses_without_a_version_a_source_or_a_known_root(store: Store) -> None:
    with pytest.raises(ConflictError, match="no scanned version yet") as caught:
        store.push("ds", "singapore", now=1.0, rank=as_given)
    assert "dataset add" in (caught.value.hint or "")
    store.add_scan("ds", "tokyo", "/data/ds", now=1.0)
    with pytest.raises(ConflictError, match="no scanned version yet"):
        store.push("ds", "singapore", now=1.0, rank=as_given)
    scanned(store)
    with pytest.raises(NotFoundError, match=f"has no version {OTHER}"):
        store.push("ds", "singapore", now=2.0, rank=as_given, root=OTHER)
    with pytest.raises(ConflictError, match="site singapore holds no complete replica"):
        store.push("ds", "shanghai", now=2.0, rank=as_given, src="singapore")
    store.record_data("tokyo", DataSync(), now=3.0)  # tokyo no longer holds it
    with pytest.raises(ConflictError, match="no site holds a complete replica"):
        store.push("ds", "singapore", now=4.0, rank=as_given)
    assert store.transfers(active_only=False) == []


def test_push_makes_one_transfer_and_asking_again_returns_it(store: Store) -> None:
    scanned(store)
    first = store.push("ds", "singapore", now=5.0, rank=as_given)
    assert first.created
    t = first.transfer
    assert (t.dataset, t.root, t.src, t.dst, t.state, t.reason) == (
        "ds",
        ROOT,
        "tokyo",
        "singapore",
        "queued",
        "push",
    )
    assert (t.bytes_total, t.chunks_total, t.bytes_sent) == (GB, 800, 0)
    assert len(t.ticket) >= 32
    again = store.push("ds", "singapore", now=6.0, rank=as_given, root=ROOT)
    assert (again.created, again.transfer) == (False, t)
    assert store.transfers() == [t]


def test_push_to_a_site_that_has_it_all_is_done_at_once(store: Store) -> None:
    scanned(store)
    result = store.push("ds", "tokyo", now=5.0, rank=as_given)
    t = result.transfer
    assert (result.created, t.state, t.bytes_sent, t.bytes_done) == (False, "done", 0, GB)
    assert store.transfers() == []
    assert store.transfers(active_only=False) == [t]


def test_the_source_is_the_first_the_ranking_names(store: Store) -> None:
    scanned(store)
    synced(store, "singapore")
    held = ReplicaHeld(dataset="ds", root=ROOT, state="complete", bytes_present=GB, path="/s")
    store.record_data("singapore", DataSync(replicas=(held,)), now=3.0)
    asked: list[Sequence[str]] = []

    def rank(sites: Sequence[str]) -> Sequence[str]:
        asked.append(sites)
        return sorted(sites, reverse=True)

    t = store.push("ds", "shanghai", now=4.0, rank=rank).transfer
    assert (asked, t.src) == ([["singapore", "tokyo"]], "tokyo")


def test_transfer_reports_from_the_destination_drive_it_to_done(store: Store) -> None:
    scanned(store)
    synced(store, "singapore")
    t = store.push("ds", "singapore", now=5.0, rank=as_given).transfer
    assert [x.id for x in store.data_work("singapore").transfers] == [t.id]
    waiting = TransferProgress(id=t.id, state="waiting")
    store.record_data("singapore", DataSync(transfers=(waiting,)), now=6.0)
    assert (store.transfer(t.id).state, store.transfer(t.id).started_at) == ("waiting", None)
    running = TransferProgress(
        id=t.id,
        state="running",
        bytes_done=GB // 4,
        bytes_sent=GB // 5,
        chunks_done=200,
        rate_bps=8e8,
        paths=(PathSample(name="sin-tyo", bytes=GB // 5, streams=4),),
    )
    store.record_data("singapore", DataSync(transfers=(running,)), now=7.0)
    seen = store.transfer(t.id)
    assert (seen.state, seen.started_at, seen.bytes_done, seen.rate_bps) == (
        "running",
        7.0,
        GB // 4,
        8e8,
    )
    assert seen.paths == (PathSample(name="sin-tyo", bytes=GB // 5, streams=4),)
    held = ReplicaHeld(dataset="ds", root=ROOT, state="partial", bytes_present=GB, path="/sin/ds")
    done = TransferProgress(id=t.id, state="done", bytes_done=GB, bytes_sent=GB // 2)
    work = store.record_data("singapore", DataSync(transfers=(done,), replicas=(held,)), now=9.0)
    assert work.transfers == ()
    seen = store.transfer(t.id)
    assert (seen.state, seen.started_at, seen.finished_at, seen.bytes_sent) == (
        "done",
        7.0,
        9.0,
        GB // 2,
    )
    dataset = store.dataset("ds")
    assert dataset is not None and dataset.latest is not None
    replicas = {r.site: r for r in dataset.latest.replicas}
    assert (replicas["singapore"].state, replicas["singapore"].path) == ("complete", "/sin/ds")
    # Reports about the ended transfer change nothing.
    late = TransferProgress(id=t.id, state="failed", error="late")
    store.record_data("singapore", DataSync(transfers=(late,), replicas=(held,)), now=10.0)
    assert store.transfer(t.id) == seen


def test_a_failed_transfer_keeps_its_error_and_others_cannot_report_on_it(store: Store) -> None:
    scanned(store)
    synced(store, "singapore")
    t = store.push("ds", "singapore", now=5.0, rank=as_given).transfer
    store.record_data(
        "tokyo", DataSync(transfers=(TransferProgress(id=t.id, state="done"),)), now=6.0
    )
    assert store.transfer(t.id).state == "queued"  # only the destination reports on it
    unknown = TransferProgress(id="t-nosuch", state="done")
    failed = TransferProgress(id=t.id, state="failed", error="chunk 12 failed verification")
    store.record_data("singapore", DataSync(transfers=(unknown, failed)), now=7.0)
    seen = store.transfer(t.id)
    assert (seen.state, seen.error, seen.finished_at) == (
        "failed",
        "chunk 12 failed verification",
        7.0,
    )


def test_cancel_ends_an_active_transfer_once(store: Store) -> None:
    scanned(store)
    t = store.push("ds", "singapore", now=5.0, rank=as_given).transfer
    cancelled = store.cancel_transfer(t.id, now=6.0)
    assert (cancelled.state, cancelled.finished_at) == ("cancelled", 6.0)
    with pytest.raises(ConflictError, match="already ended"):
        store.cancel_transfer(t.id, now=7.0)
    with pytest.raises(NotFoundError, match="there is no transfer t-nosuch"):
        store.cancel_transfer("t-nosuch", now=7.0)
    assert store.transfer(t.id) == cancelled
    # Once cancelled, a new push of the same version makes a new transfer.
    assert store.push("ds", "singapore", now=8.0, rank=as_given).created


def test_locality_is_the_latest_versions_complete_replicas(store: Store) -> None:
    scanned(store, ROOT, now=1.0)
    assert [(d.name, d.root, d.bytes, d.sites) for d in store.dataset_locality()] == [
        ("ds", ROOT, GB, frozenset({"tokyo"}))
    ]
    synced(store, "singapore")
    scanned(store, OTHER, site="singapore", now=10.0)
    [found] = store.dataset_locality()
    assert (found.root, found.sites) == (OTHER, frozenset({"singapore"}))


def test_registered_names_include_datasets_without_a_version(store: Store) -> None:
    scanned(store)
    store.add_scan("empty", "tokyo", "/data/empty", now=2.0)
    assert store.dataset_names() == frozenset({"ds", "empty"})
    assert [d.name for d in store.dataset_locality()] == ["ds"]

"""The agent's data plane without a server: scan orders, serving, receiving, resuming."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from onecluster.agent._data import SiteData
from onecluster.schema import (
    DataOrders,
    DataReport,
    HopOut,
    PathOut,
    ReceiveOrder,
    ScanOrder,
    ServeOrder,
)


def wait_for(check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail("timed out")
        time.sleep(0.05)


def tree_of(top: Path) -> dict[str, bytes]:
    return {str(p.relative_to(top)): p.read_bytes() for p in sorted(top.rglob("*")) if p.is_file()}


@pytest.fixture
def sites(tmp_path: Path) -> Iterator[tuple[SiteData, SiteData, Path]]:
    rng = random.Random(11)
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(6):
        (tree / f"part-{i}.bin").write_bytes(rng.randbytes(2_000_000))
    src = SiteData("singapore", tmp_path / "sg", address="127.0.0.1")
    dst = SiteData("shanghai", tmp_path / "sh", address="127.0.0.1")
    yield src, dst, tree
    src.close()
    dst.close()


def scanned(site: SiteData, tree: Path) -> str:
    site.apply(DataOrders(scans=[ScanOrder(id="s1", dataset="ds", path=str(tree))]))
    wait_for(lambda: site.report().scans[0].state == "done")
    report = site.report().scans[0]
    assert report.files == 6 and report.bytes_done == 12_000_000
    assert report.root is not None
    return report.root


def orders(root: str, src: SiteData, rate: float | None = None) -> tuple[DataOrders, DataOrders]:
    path = PathOut(
        name="direct",
        circuits=["sha-sin"],
        rtt_s=0.001,
        rate_bps=rate,
        hops=[HopOut(address="127.0.0.1", port=src.server.port)],
    )
    serve = ServeOrder(id="t1", dataset="ds", root=root, ticket="tk", rates={"direct": rate or 0})
    if rate is None:
        serve = ServeOrder(id="t1", dataset="ds", root=root, ticket="tk")
    receive = ReceiveOrder(
        id="t1", dataset="ds", root=root, src="singapore", ticket="tk", paths=[path]
    )
    return DataOrders(scans=[], serve=[serve]), DataOrders(receive=[receive])


def transfer_of(report: DataReport) -> dict[str, object]:
    return report.transfers[0].model_dump()


def test_a_scanned_version_is_received_bit_for_bit_and_reported(
    sites: tuple[SiteData, SiteData, Path],
) -> None:
    src, dst, tree = sites
    root = scanned(src, tree)
    [replica] = src.report().replicas
    assert (replica.state, replica.path, replica.root) == ("complete", str(tree), root)
    serve, receive = orders(root, src)
    src.apply(serve)
    dst.apply(receive)
    wait_for(lambda: dst.report().transfers[0].state == "done")
    done = transfer_of(dst.report())
    assert done["bytes_done"] == done["bytes_total"] == 12_000_000
    assert done["chunks_sent"] == done["chunks_total"]
    [received] = dst.report().replicas
    assert received.state == "complete"
    assert tree_of(Path(received.path)) == tree_of(tree)
    assert dst.report().circuit_bytes["sha-sin"] >= 12_000_000


def test_a_restarted_receiver_resumes_without_fetching_a_verified_chunk_again(
    sites: tuple[SiteData, SiteData, Path], tmp_path: Path
) -> None:
    src, dst, tree = sites
    root = scanned(src, tree)
    serve, receive = orders(root, src, rate=40e6)  # 12 MB in about 2.4 s
    src.apply(serve)
    dst.apply(receive)
    wait_for(lambda: transfer_of(dst.report())["chunks_done"] >= 3)  # type: ignore[operator]
    dst.close()  # the agent stops mid-transfer; its files and index stay on disk
    again = SiteData("shanghai", tmp_path / "sh", address="127.0.0.1")
    try:
        src.apply(serve)
        again.apply(receive)
        wait_for(lambda: again.report().transfers[0].state == "done")
        resumed = transfer_of(again.report())
        assert resumed["chunks_sent"] < resumed["chunks_total"]  # type: ignore[operator]
        [received] = again.report().replicas
        assert tree_of(Path(received.path)) == tree_of(tree)
    finally:
        again.close()


def test_a_transfer_no_longer_listed_is_stopped(sites: tuple[SiteData, SiteData, Path]) -> None:
    src, dst, tree = sites
    root = scanned(src, tree)
    serve, receive = orders(root, src, rate=8e6)
    src.apply(serve)
    dst.apply(receive)
    wait_for(lambda: transfer_of(dst.report())["chunks_done"] >= 1)  # type: ignore[operator]
    dst.apply(DataOrders())
    assert dst.report().transfers == []
    [partial] = dst.report().replicas
    assert partial.state == "partial" and 0 < partial.bytes_present < 12_000_000


def test_a_version_the_source_no_longer_holds_is_named_to_the_receiver(
    sites: tuple[SiteData, SiteData, Path],
) -> None:
    src, dst, _ = sites
    serve, receive = orders("ab" * 32, src)
    src.apply(serve)
    dst.apply(receive)
    wait_for(lambda: transfer_of(dst.report())["error"] is not None)
    assert "holds no complete replica of ds" in str(transfer_of(dst.report())["error"])
    assert dst.report().transfers[0].state == "waiting"


def test_a_scan_of_a_missing_directory_fails_with_its_reason(
    sites: tuple[SiteData, SiteData, Path], tmp_path: Path
) -> None:
    src, _, _ = sites
    src.apply(DataOrders(scans=[ScanOrder(id="s9", dataset="ds", path=str(tmp_path / "nope"))]))
    wait_for(lambda: src.report().scans[0].state == "failed")
    assert "does not exist at this site" in str(src.report().scans[0].error)

"""The data plane's metrics after real fetches on loopback: the receiver's and the source's
counters move by what crossed, split by peer site and path kind."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from onecluster.dataplane import DataPlaneMetrics, DataServer, Fetch, Route, Served
from onecluster.storage import DataStore
from onecluster.transfer import decode_manifest, encode_manifest

from .conftest import Grants, Proxy, Source


class Scrape:
    """One exposition of ``metrics``, read as ``{(name, labels): value}``."""

    def __init__(self, metrics: DataPlaneMetrics) -> None:
        registry = CollectorRegistry()
        registry.register(metrics)
        text = generate_latest(registry).decode()
        self.samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def value(self, name: str, **labels: str) -> float:
        """The sum of ``name``'s samples whose labels include ``labels``."""
        return sum(
            v
            for (n, have), v in self.samples.items()
            if n == name and set(labels.items()) <= set(have)
        )


def _fetch(
    source: Source, tmp_path: Path, routes: list[Route], metrics: DataPlaneMetrics, **kw: float
) -> Fetch:
    replica = DataStore(tmp_path / "dst").receive(
        "ds", decode_manifest(encode_manifest(source.manifest), root=source.manifest.root)
    )
    fetch = Fetch(
        transfer="t1", ticket="secret", sink=replica, chunks=replica.open(), routes=routes,
        window_bytes=4 << 20, site="east", peer="west", metrics=metrics, **kw,
    )  # fmt: skip
    fetch.start()
    assert fetch.wait(60), "the fetch did not finish"
    fetch.stop()
    assert fetch.error is None
    replica.finish()
    return fetch


def _wait(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.02)


def test_both_ends_count_the_bytes_and_chunks_of_a_fetch_by_peer_and_path_kind(
    source: Source, tmp_path: Path
) -> None:
    source.serve(rate_bps=200e6)
    relay = DataServer(Grants({("t1", "secret"): Served(relay=True)}), host="127.0.0.1")
    mine = DataPlaneMetrics()
    try:
        routes = [
            Route("direct", (("127.0.0.1", source.server.port),)),
            Route("via", (("127.0.0.1", relay.port), ("127.0.0.1", source.server.port))),
        ]
        fetch = _fetch(source, tmp_path, routes, mine)
        _wait(lambda: Scrape(source.server.metrics).value("onecluster_dataplane_streams") == 0)
    finally:
        relay.close()
    chunks = len(source.manifest.chunks)
    by_path = {p.name: p for p in fetch.paths()}
    got, sent = Scrape(mine), Scrape(source.server.metrics)
    for name, kind in (("direct", "direct"), ("via", "relay")):
        received = got.value("onecluster_dataplane_received_bytes_total", peer="west", path=kind)
        assert received == by_path[name].bytes > 0
        assert sent.value("onecluster_dataplane_sent_bytes_total", peer="east", path=kind) == (
            received
        )
        assert got.value("onecluster_dataplane_chunks_fetched_total", path=kind) == (
            by_path[name].chunks
        )
    assert got.value("onecluster_dataplane_chunks_verified_total", peer="west") == chunks
    assert got.value("onecluster_dataplane_chunk_verify_failures_total") == 0
    assert sent.value("onecluster_dataplane_chunks_served_total", peer="east") == chunks
    assert got.value("onecluster_dataplane_chunk_fetch_duration_seconds_count") == chunks
    assert got.value("onecluster_dataplane_chunk_fetch_duration_seconds_sum") > 0
    relayed = Scrape(relay.metrics).value("onecluster_dataplane_relayed_bytes_total")
    assert relayed > by_path["via"].bytes  # the chunks, and the requests and frame heads
    assert got.value("onecluster_dataplane_streams", role="fetch") == 0
    assert got.value("onecluster_dataplane_connect_retries_total") == 0
    assert got.value("onecluster_dataplane_reconnects_total") == 0


def test_corrupt_chunks_count_as_verification_failures_and_not_as_verified(
    source: Source, tmp_path: Path
) -> None:
    source.serve(rates={"clean": 50e6})
    bad = Proxy(("127.0.0.1", source.server.port), flip_every=400_000)
    mine = DataPlaneMetrics()
    try:
        routes = [
            Route("clean", (("127.0.0.1", source.server.port),)),
            Route("noisy", (("127.0.0.1", bad.port),)),
        ]
        fetch = _fetch(source, tmp_path, routes, mine)
    finally:
        bad.close()
    corrupt = sum(p.corrupt for p in fetch.paths())
    got = Scrape(mine)
    assert got.value("onecluster_dataplane_chunk_verify_failures_total") == corrupt > 0
    assert got.value("onecluster_dataplane_chunks_verified_total") == len(source.manifest.chunks)
    assert got.value("onecluster_dataplane_chunks_fetched_total") == (
        len(source.manifest.chunks) + corrupt
    )


def test_a_refused_connection_is_a_retry_and_a_broken_stream_a_reconnect(
    source: Source, tmp_path: Path
) -> None:
    source.serve(rate_bps=20e6)  # slow enough that the cut lands mid-transfer
    cut = Proxy(("127.0.0.1", source.server.port))
    mine = DataPlaneMetrics()
    with contextlib.closing(DataServer(Grants(), host="127.0.0.1")) as gone:
        dead_port = gone.port
    routes = [
        Route("cut", (("127.0.0.1", cut.port),), rate_bps=1e6),  # one stream
        Route("dead", (("127.0.0.1", dead_port),), rate_bps=1e6),
    ]

    def cut_once() -> None:
        _wait(lambda: Scrape(mine).value("onecluster_dataplane_chunks_verified_total") > 0)
        cut.reset()

    cutter = threading.Thread(target=cut_once, daemon=True)
    cutter.start()
    try:
        _fetch(source, tmp_path, routes, mine, stall_s=1.0)
    finally:
        cut.close()
    cutter.join(10)
    got = Scrape(mine)
    assert got.value("onecluster_dataplane_connect_retries_total", path="direct") >= 1
    assert got.value("onecluster_dataplane_reconnects_total", peer="west") >= 1

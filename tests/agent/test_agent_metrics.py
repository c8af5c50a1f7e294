"""The agent's ``/metrics``: its data plane's counters after a real transfer between two
sites on loopback, scraped over HTTP, and ``run_agent --metrics`` serving them."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from onecluster.agent import AgentConfig, run_agent
from onecluster.agent._data import SiteData
from onecluster.telemetry import MetricsServer

from .test_agent_data import orders, scanned, transfer_of, wait_for


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(url, timeout=5).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def one(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    key = (name, tuple(sorted(labels.items())))
    assert key in samples, f"{key} not scraped"
    return samples[key]


@pytest.fixture
def exported(tmp_path: Path) -> Iterator[tuple[SiteData, SiteData, MetricsServer, MetricsServer]]:
    src = SiteData("singapore", tmp_path / "sg", address="127.0.0.1")
    dst = SiteData("shanghai", tmp_path / "sh", address="127.0.0.1")
    src_http = MetricsServer([src.metrics], "127.0.0.1", 0)
    dst_http = MetricsServer([dst.metrics], "127.0.0.1", 0)
    yield src, dst, src_http, dst_http
    for closing in (src_http, dst_http, src, dst):
        closing.close()


def test_a_transfer_moves_both_agents_counters_by_what_it_carried(
    exported: tuple[SiteData, SiteData, MetricsServer, MetricsServer], tmp_path: Path
) -> None:
    src, dst, src_http, dst_http = exported
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(6):
        (tree / f"part-{i}.bin").write_bytes((b"x%d" % i) * 1_000_000)  # 2 MB that compress
    root = scanned(src, tree)
    serve, receive = orders(root, src)
    src.apply(serve)
    dst.apply(receive)
    wait_for(lambda: dst.report().transfers[0].state == "done")
    report = transfer_of(dst.report())
    got, sent = scrape(dst_http.url), scrape(src_http.url)
    flow_in = {"peer": "singapore", "path": "direct"}
    flow_out = {"peer": "shanghai", "path": "direct"}
    wire_bytes = one(got, "onecluster_dataplane_received_bytes_total", **flow_in)
    assert wire_bytes == report["bytes_sent"]
    assert wire_bytes < report["bytes_total"]  # the repetitive files went compressed
    assert one(sent, "onecluster_dataplane_sent_bytes_total", **flow_out) == wire_bytes
    chunks = report["chunks_total"]
    assert one(got, "onecluster_dataplane_chunks_verified_total", **flow_in) == chunks
    assert one(got, "onecluster_dataplane_chunk_fetch_duration_seconds_count", **flow_in) == chunks
    assert one(sent, "onecluster_dataplane_chunks_served_total", **flow_out) == chunks
    assert one(got, "onecluster_dataplane_streams", role="fetch", **flow_in) == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_an_agent_without_circuits_serves_its_data_plane_on_metrics(
    control_plane: Any, tmp_path: Path
) -> None:
    address = f"127.0.0.1:{free_port()}"
    cfg = AgentConfig(
        site="sha",
        server_url=control_plane.url,
        token="agent-token-sha",
        pools={"H100": 1},
        work_dir=tmp_path / "work",
        data_dir=tmp_path / "data",
        heartbeat_interval_s=0.05,
        metrics_address=address,
    )
    stop = threading.Event()
    thread = threading.Thread(target=run_agent, args=(cfg,), kwargs={"stop": stop})
    thread.start()
    try:
        control_plane.wait_for(lambda b: b["capacity"] == {"H100": 1})
        text = httpx.get(f"http://{address}/metrics", timeout=5).text
    finally:
        stop.set()
        thread.join(timeout=20)
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {"onecluster_dataplane_received_bytes", "onecluster_dataplane_streams"} <= names
    assert not any(n.startswith("onecluster_link_") for n in names)  # no circuit to probe
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://{address}/metrics", timeout=2)  # closed with the agent

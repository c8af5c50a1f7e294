"""A worker's Prometheus metrics: in one process (two sites on loopback, one lost and back),
and from the launcher's ``--prometheus`` around real worker processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from tests.training.conftest import fast_config, make_worker
from tests.training.test_training_sync import SITES, a_outlives_b, train_until, wait_for

from onecluster.errors import ValidationError
from onecluster.training import CrossSite, TrainingCollector, serve_metrics

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def collected(cross: CrossSite) -> Samples:
    registry = CollectorRegistry()
    registry.register(TrainingCollector(cross))
    return parse(generate_latest(registry).decode())


def one(samples: Samples, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    assert key in samples, f"{key} not exported"
    return samples[key]


def test_a_lost_and_returning_site_moves_the_counters_by_one(base_port: int) -> None:
    cfg = fast_config()  # a round every 5 steps
    a = a_outlives_b(base_port, cfg, 20)
    lost = collected(a.cross)
    assert one(lost, "onecluster_training_sites_lost_total", peer="b") == 1
    assert ("onecluster_training_sites_rejoined_total", (("peer", "b"),)) not in lost

    b2 = make_worker(SITES, 1, base_port, cfg, seed=99)  # a fresh process: it heals
    healer = threading.Thread(target=b2.cross.start, daemon=True)
    trainer = threading.Thread(
        target=lambda: (wait_for(lambda: a.cross.mesh.alive(1)), train_until(a, 40, step_s=0.002)),
        daemon=True,
    )
    healer.start()
    trainer.start()
    healer.join(30)
    train_until(b2, 40, step_s=0.002)
    trainer.join(30)
    assert a.error is None and b2.error is None
    back, healed = collected(a.cross), collected(b2.cross)
    stats = a.cross.stats()
    assert one(back, "onecluster_training_sites_lost_total", peer="b") == 1
    assert one(back, "onecluster_training_sites_rejoined_total", peer="b") == 1
    assert one(healed, "onecluster_training_heals_total") == 1
    assert one(back, "onecluster_training_heals_total") == 0
    # a took every step and merged every round itself: one observation each
    assert one(back, "onecluster_training_inner_step") == stats.inner_steps == 40
    assert one(back, "onecluster_training_step_duration_seconds_count") == 40
    assert one(back, "onecluster_training_outer_step") == stats.rounds == 8
    assert one(back, "onecluster_training_outer_sync_duration_seconds_count") == 8
    assert one(back, "onecluster_training_wan_sent_bytes_total") == stats.wan_sent > 0
    assert one(back, "onecluster_training_wan_received_bytes_total") == stats.wan_received
    a.cross.close()
    b2.cross.close()


def test_a_malformed_address_is_refused_and_none_serves_nothing(base_port: int) -> None:
    a = make_worker(SITES, 0, base_port, fast_config())
    try:
        assert serve_metrics(a.cross, {}) is None
        with pytest.raises(ValidationError, match="is not HOST:PORT"):
            serve_metrics(a.cross, {"ONECLUSTER_TRAINING_PROMETHEUS": "localhost"})
    finally:
        a.cross.close()


def launch(site_rank: int, port: int, jsonl: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "ONECLUSTER_GANG_SITES": "east,west",
        "ONECLUSTER_GANG_RANK": str(site_rank),
        "ONECLUSTER_GANG_PORT": str(port),
        "ONECLUSTER_GPUS": "1",
    }
    argv = [
        sys.executable, "-m", "onecluster.training", "launch", *extra, "--",
        sys.executable, "-m", "onecluster.training.chargpt", "--metrics", str(jsonl),
        "--eval-every", "0", "--rendezvous-timeout", "60", "--width", "16",
        "--steps", "100000", "--sync-every", "5",
    ]  # fmt: skip
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def poll(look: Callable[[], Samples | None], procs: list[subprocess.Popen[bytes]]) -> Samples:
    deadline = time.monotonic() + 120
    while (found := look()) is None:
        assert all(p.poll() is None for p in procs), "a launcher ended early"
        assert time.monotonic() < deadline, "the metrics did not show two rounds in time"
        time.sleep(0.2)
    return found


@pytest.mark.integration
def test_the_launchers_prometheus_option_serves_each_workers_metrics(
    base_port: int, tmp_path: Path
) -> None:
    jsonl = tmp_path / "m.jsonl"
    procs = [
        launch(0, base_port, jsonl, "--prometheus", "127.0.0.1:0"),
        launch(1, base_port, jsonl),
    ]
    try:

        def east_url() -> str | None:
            if not jsonl.exists():
                return None
            for line in jsonl.read_text().splitlines():
                event = json.loads(line)
                if event["event"] == "start" and event["site"] == "east":
                    return str(event["prometheus"])
            return None

        def two_rounds() -> Samples | None:
            url = east_url()
            if url is None:
                return None
            samples = parse(httpx.get(url, timeout=5).text)
            return samples if one(samples, "onecluster_training_outer_step") >= 2 else None

        samples = poll(two_rounds, procs)
        starts = [json.loads(x) for x in jsonl.read_text().splitlines() if '"start"' in x]
        assert [e["prometheus"] for e in starts if e["site"] == "west"] == [None]
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.communicate(timeout=60)
    assert one(samples, "onecluster_training_outer_sync_duration_seconds_count") >= 2
    assert one(samples, "onecluster_training_step_duration_seconds_count") >= 10
    assert one(samples, "onecluster_training_wan_sent_bytes_total") > 0

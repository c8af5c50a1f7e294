"""Probers on loopback: two real UDP sockets per circuit, real threads, real /metrics."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from onecluster.errors import BackendError, ValidationError
from onecluster.telemetry import (
    CircuitSnapshot,
    MetricsServer,
    Packet,
    PeerEndpoint,
    ProbeCollector,
    Prober,
    decode,
    encode,
)


def wait_until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail("condition not reached in time")
        time.sleep(0.02)


def peer(prober: Prober, circuit: str, site: str) -> PeerEndpoint:
    host, port = prober.endpoints()[circuit].rsplit(":", 1)
    return PeerEndpoint(site=site, host=host, port=int(port))


def circuits(prober: Prober) -> dict[str, CircuitSnapshot]:
    return {snap.circuit: snap for snap in prober.snapshot()}


@pytest.fixture
def pair() -> Iterator[tuple[Prober, Prober]]:
    a = Prober({"c1": "127.0.0.1"}, port=0, interval_s=0.02)
    b = Prober({"c1": "127.0.0.2"}, port=0, interval_s=0.02)
    a.set_peers({"c1": peer(b, "c1", "b")})
    b.set_peers({"c1": peer(a, "c1", "a")})
    a.start()
    b.start()
    yield a, b
    a.close()
    b.close()


def test_both_ends_measure_the_circuit(pair: tuple[Prober, Prober]) -> None:
    a, b = pair
    wait_until(lambda: all(s.received >= 20 for s in (*a.snapshot(), *b.snapshot())))
    snap = a.snapshot()[0]
    assert snap.peer is not None and snap.peer.site == "b"
    assert snap.lost == 0
    f = snap.figures
    assert f.rtt_min_s is not None and 0 < f.rtt_min_s < 0.05
    assert f.rtt_p99_s is not None and f.rtt_p99_s >= f.rtt_min_s
    assert f.jitter_s is not None
    assert snap.silent_s is not None and snap.silent_s < 1.0


def test_outcomes_wait_for_acknowledgement_in_sequence_order(pair: tuple[Prober, Prober]) -> None:
    a, _ = pair
    wait_until(lambda: len(a.pending()["c1"]) >= 10)
    pending = a.pending()["c1"]
    seqs = [o.seq for o in pending]
    assert seqs == sorted(seqs) and seqs[0] == 0
    a.acknowledge({"c1": seqs[4]})
    assert a.pending()["c1"][0].seq == seqs[5]


def test_a_peer_that_vanishes_is_lost_probes_and_wants_attention() -> None:
    a = Prober({"c1": "127.0.0.1"}, port=0, interval_s=0.02)
    b = Prober({"c1": "127.0.0.2"}, port=0, interval_s=0.02)
    try:
        a.set_peers({"c1": peer(b, "c1", "b")})
        a.start()
        b.start()
        wait_until(lambda: a.snapshot()[0].received >= 5)
        assert not a.attention()
        b.close()  # the far end dies: its socket closes
        wait_until(lambda: a.snapshot()[0].lost >= 3)
        assert a.attention()
        outcomes = a.pending()["c1"]
        assert outcomes[-1].rtt_s is None
        assert a.snapshot()[0].figures.loss > 0
    finally:
        a.close()
        b.close()


def test_packets_that_are_not_probes_are_counted_and_ignored(pair: tuple[Prober, Prober]) -> None:
    a, _ = pair
    host, port = a.endpoints()["c1"].rsplit(":", 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"hello", (host, int(port)))
    wait_until(lambda: a.unknown_packets == 1)
    wait_until(lambda: a.snapshot()[0].received >= 5)


def test_a_circuit_without_a_known_peer_is_not_probed() -> None:
    a = Prober({"c1": "127.0.0.1", "c2": "127.0.0.1"}, port=0, interval_s=0.01)
    b = Prober({"c2": "127.0.0.2"}, port=0, interval_s=0.01)
    try:
        a.set_peers({"c2": peer(b, "c2", "b")})  # c1's far end is not known
        a.start()
        b.start()
        # c2's answered probes prove that turns went by in which c1 would have been probed
        wait_until(lambda: circuits(a)["c2"].received >= 10)
        assert (circuits(a)["c1"].sent, circuits(a)["c1"].peer) == (0, None)
    finally:
        a.close()
        b.close()


def test_a_bad_address_or_interval_is_refused_at_once() -> None:
    with pytest.raises(BackendError, match=r"192\.0\.2\.55"):
        Prober({"c1": "192.0.2.55"})  # TEST-NET: not on this host
    with pytest.raises(ValidationError, match="interval"):
        Prober({"c1": "127.0.0.1"}, port=0, interval_s=0)


def test_metrics_are_served_in_the_prometheus_format(pair: tuple[Prober, Prober]) -> None:
    a, _ = pair
    wait_until(lambda: a.snapshot()[0].received >= 10)
    server = MetricsServer([ProbeCollector(a)], "127.0.0.1", 0)
    try:
        with urllib.request.urlopen(server.url, timeout=5) as response:
            text = response.read().decode()
    finally:
        server.close()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    sent = families["onecluster_link_probes_sent"].samples[0]
    assert sent.labels == {"circuit": "c1", "peer": "b"}
    assert sent.value >= 10
    rtt = families["onecluster_link_rtt_seconds"]
    buckets = [s for s in rtt.samples if s.name.endswith("_bucket")]
    assert buckets[-1].labels["le"] == "+Inf"
    assert [s.value for s in buckets] == sorted(s.value for s in buckets)  # cumulative
    quantiles = {s.labels["quantile"] for s in families["onecluster_link_pdv_seconds"].samples}
    assert quantiles == {"0.5", "0.99"}
    assert families["onecluster_link_loss_ratio"].samples[0].value == 0.0
    assert "onecluster_link_jitter_seconds" in families


def test_the_metrics_port_must_be_free(pair: tuple[Prober, Prober]) -> None:
    a, _ = pair
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(BackendError, match="metrics"):
            MetricsServer([ProbeCollector(a)], "127.0.0.1", port)


class SlowReflector:
    """A reflector whose replies can be held back, as on a path that suddenly got longer."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.3", 0))
        self.sock.settimeout(0.05)
        self.delay = 0.0
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        held: list[tuple[float, bytes, tuple[str, int]]] = []
        while self.running:
            try:
                data, peer = self.sock.recvfrom(2048)
                packet = decode(data)
                if packet is not None and packet.kind == "probe":
                    reply = encode(Packet("reply", packet.seq, packet.sent_ns, time.time_ns()))
                    held.append((time.monotonic() + self.delay, reply, peer))
            except TimeoutError:
                pass
            now = time.monotonic()
            for item in [h for h in held if h[0] <= now]:
                self.sock.sendto(item[1], item[2])
                held.remove(item)

    def close(self) -> None:
        self.running = False
        self.thread.join()
        self.sock.close()


def test_a_path_that_gets_longer_costs_a_probe_not_an_outage() -> None:
    far = SlowReflector()
    a = Prober({"c1": "127.0.0.1"}, port=0, interval_s=0.02)
    try:
        a.set_peers({"c1": PeerEndpoint("b", "127.0.0.3", far.sock.getsockname()[1])})
        a.start()
        wait_until(lambda: a.snapshot()[0].received >= 20)
        far.delay = 0.3  # far above 3 × the loopback RTT: every reply now comes "late" at first
        wait_until(lambda: a.snapshot()[0].late >= 1, timeout=5)
        then = a.snapshot()[0]
        # the timeout stretched: replies over the longer path count again ...
        wait_until(lambda: a.snapshot()[0].received >= then.received + 20, timeout=10)
        snap = a.snapshot()[0]
        assert snap.lost - then.lost <= 20  # ... and only the probes in flight were lost
        assert max(o.rtt_s or 0 for o in a.pending()["c1"][-10:]) >= 0.29
    finally:
        a.close()
        far.close()


def test_faster_probes_report_one_outcome_per_report_interval() -> None:
    a = Prober({"c1": "127.0.0.1"}, port=0, interval_s=0.01, report_interval_s=0.05)
    b = Prober({"c1": "127.0.0.2"}, port=0, interval_s=0.01)
    try:
        a.set_peers({"c1": peer(b, "c1", "b")})
        a.start()
        b.start()
        wait_until(lambda: len(a.pending()["c1"]) >= 6)
        seqs = [o.seq for o in a.pending()["c1"]]
        assert seqs == list(range(0, 5 * len(seqs), 5))  # one probe in five, by sequence
        assert a.snapshot()[0].sent >= seqs[-1]  # the window has every probe
    finally:
        a.close()
        b.close()
    with pytest.raises(ValidationError, match="reported every"):
        Prober({"c1": "127.0.0.1"}, port=0, interval_s=0.1, report_interval_s=0.05)


def test_liveness_hands_out_each_reply_once_with_the_silence_proven_before_it() -> None:
    a = Prober({"c1": "127.0.0.1", "c2": "127.0.0.1"}, port=0, interval_s=0.01)
    b = Prober({"c1": "127.0.0.2"}, port=0, interval_s=0.01)
    try:
        a.set_peers({"c1": peer(b, "c1", "b")})  # c2's far end is not known: not probed
        a.start()
        b.start()
        heard: list[float] = []
        until = float("-inf")

        def read() -> None:
            nonlocal until
            live = a.liveness(wait_s=0.1)
            assert live.probing == {"c1"} and live.heard["c2"] == ()
            assert live.until >= until  # it never goes back
            until = live.until
            heard.extend(h.at for h in live.heard["c1"])

        wait_until(lambda: read() or len(heard) >= 20)
        assert heard == sorted(heard) and len(set(heard)) == len(heard)
        assert until >= heard[0]
        b.close()  # the far end dies
        last = heard[-1]
        wait_until(lambda: read() or until - heard[-1] >= 0.3)
        assert heard[-1] - last < 0.1  # no reply since: silent from the last one to ``until``
    finally:
        a.close()
        b.close()


def test_a_reply_after_a_silence_says_how_long_the_silence_was_proven() -> None:
    far = SlowReflector()
    a = Prober({"c1": "127.0.0.1"}, port=0, interval_s=0.01)
    try:
        a.set_peers({"c1": PeerEndpoint("b", "127.0.0.3", far.sock.getsockname()[1])})
        a.start()
        wait_until(lambda: a.snapshot()[0].received >= 10)
        a.liveness()
        far.delay = 0.4  # the replies stop for 0.4 s, then come again (later)
        quiet: list[float] = []
        wait_until(
            lambda: (
                quiet.extend(h.quiet_s for h in a.liveness().heard["c1"])
                or bool(quiet and max(quiet) > 0.2)
            )
        )
        assert 0.2 < max(quiet) < 0.6
    finally:
        a.close()
        far.close()

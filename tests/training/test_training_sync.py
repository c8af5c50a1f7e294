"""Sites of one gang inside one process (a thread and a mesh each, on loopback): the rounds,
the bytes on the wire, a lost site, a returning one, flaps, and bad peers."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
import torch
from tests.training.conftest import Relay, Worker, fast_config, make_worker, run_threads

from onecluster.errors import UnavailableError, ValidationError
from onecluster.training import SyncConfig
from onecluster.training._codec import encode
from onecluster.training._mesh import Lineage
from onecluster.training._wire import read_frame, write_frame

SITES = ("a", "b")


def wait_for(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.01)


def train_until(
    worker: Worker, total: int, stop: threading.Event | None = None, step_s: float = 0.0
) -> None:
    gen = torch.Generator().manual_seed(worker.cross.topology.site_rank)
    target = torch.linspace(-1, 1, 64)
    try:
        while worker.cross.stats().inner_steps < total:
            if stop is not None and stop.is_set():
                return
            x = torch.randn(16, 64, generator=gen)
            ((worker.model(x) - target) ** 2).mean().backward()
            done = worker.cross.step(16)
            if done is not None:
                worker.rounds.append(done)
            if step_s:
                time.sleep(step_s)  # the step's compute time
    except BaseException as exc:  # noqa: BLE001 - handed to the test thread
        worker.error = exc


def start_all(*workers: Worker) -> None:
    run_threads(*(w.cross.start for w in workers))


def a_outlives_b(base_port: int, cfg: SyncConfig, a_steps: int) -> Worker:
    """Sites a and b train; b dies after 10 steps (its connections close, as when its
    process is killed) while a goes on to ``a_steps``.  Site a's worker."""
    a = make_worker(SITES, 0, base_port, cfg)
    b = make_worker(SITES, 1, base_port, cfg)
    start_all(a, b)

    def b_dies() -> None:
        train_until(b, 10)
        b.cross.close()

    run_threads(lambda: train_until(a, a_steps), b_dies)
    assert a.error is None and b.error is None
    return a


def test_diloco_sends_h_times_compression_fewer_bytes_than_per_step_ddp(base_port: int) -> None:
    def run(port: int, **config: object) -> list[Worker]:
        cfg = fast_config(**config)
        workers = [make_worker(SITES, r, port, cfg) for r in range(2)]
        start_all(*workers)
        run_threads(*(lambda w=w: train_until(w, 20) for w in workers))
        for w in workers:
            assert w.error is None
            w.cross.close()
        return workers

    ddp = run(base_port, mode="ddp", sync_every=1, bits=32)
    diloco = run(
        base_port + 1024 if base_port + 1280 < 65535 else base_port - 1024, sync_every=5, bits=8
    )
    assert [len(w.rounds) for w in ddp] == [20, 20]
    assert [len(w.rounds) for w in diloco] == [4, 4]
    for site in range(2):
        d = ddp[site].cross.stats()
        q = diloco[site].cross.stats()
        ratio = (d.sync_sent + d.sync_received) / (q.sync_sent + q.sync_received)
        assert ratio == pytest.approx(5 * 4, rel=0.01)  # H × (32 / 8 bits)
    # Every round was applied alike: after the last one both sites hold the same weights.
    for pa, pb in zip(diloco[0].model.parameters(), diloco[1].model.parameters(), strict=True):
        assert torch.equal(pa, pb)
    for pa, pb in zip(ddp[0].model.parameters(), ddp[1].model.parameters(), strict=True):
        assert torch.equal(pa, pb)


def test_sites_start_from_the_lowest_sites_weights(base_port: int) -> None:
    cfg = fast_config()
    a = make_worker(SITES, 0, base_port, cfg, seed=1)
    b = make_worker(SITES, 1, base_port, cfg, seed=2)
    assert not torch.equal(a.model.weight, b.model.weight)
    start_all(a, b)
    assert torch.equal(a.model.weight, b.model.weight)
    assert b.cross.stats().heal_received > 0
    a.cross.close()
    b.cross.close()


@pytest.mark.parametrize(
    "config",
    [{}, {"mode": "ddp", "sync_every": 1, "bits": 32}],
    ids=["diloco", "ddp"],
)
def test_a_lost_site_is_left_out_and_a_restarted_one_heals_and_rejoins(
    base_port: int, config: dict[str, object]
) -> None:
    """In ddp mode the healed site also takes the inner optimizer's state: without it the
    two sites' weights drifted apart after the heal (found by an outside review)."""
    cfg = fast_config(**config)
    a = a_outlives_b(base_port, cfg, 30)
    assert a.rounds[-1].participants == ("a",)
    assert all(r.participants == ("a", "b") for r in a.rounds[:2])

    b2 = make_worker(SITES, 1, base_port, cfg, seed=99)  # a fresh process, other weights
    heal: list[object] = []
    threads = [
        threading.Thread(target=lambda: heal.append(b2.cross.start()), daemon=True),
        threading.Thread(
            target=lambda: (
                wait_for(lambda: a.cross.mesh.alive(1)),
                train_until(a, 80, step_s=0.002),
            ),
            daemon=True,
        ),
    ]
    for t in threads:
        t.start()
    threads[0].join(30)
    assert heal and getattr(heal[0], "healed_from", None) == "a"
    train_until(b2, 80, step_s=0.002)
    threads[1].join(30)
    assert a.error is None and b2.error is None
    assert a.rounds[-1].participants == ("a", "b")
    assert b2.rounds[-1].participants == ("a", "b")
    for pa, pb in zip(a.model.parameters(), b2.model.parameters(), strict=True):
        assert torch.equal(pa, pb)
    a.cross.close()
    b2.cross.close()


def relayed_pair(
    base_port: int, relays: list[Relay], **config: object
) -> tuple[Worker, Worker, Relay]:
    """Sites a and b with b's connection to a, and both sides' heartbeats, through a relay
    on 127.0.0.2 (each site listens on 127.0.0.1)."""
    cfg = fast_config(**config)
    a = make_worker(SITES, 0, base_port, cfg, addresses={"b": "127.0.0.2"})
    b = make_worker(SITES, 1, base_port, cfg, addresses={"a": "127.0.0.2"})
    port, port_b = a.cross.topology.port(0), a.cross.topology.port(1)
    relay = Relay(
        ("127.0.0.2", port),
        ("127.0.0.1", port),
        datagrams=(
            (("127.0.0.2", port), ("127.0.0.1", port)),
            (("127.0.0.2", port_b), ("127.0.0.1", port_b)),
        ),
    )
    relays.append(relay)
    start_all(a, b)
    return a, b, relay


def test_a_flap_shorter_than_the_timeout_changes_nothing(
    base_port: int, relays: list[Relay]
) -> None:
    a, b, relay = relayed_pair(base_port, relays, peer_timeout_s=2.0, heartbeat_s=0.2)
    threads = [
        threading.Thread(target=train_until, args=(w, 60, None, 0.002), daemon=True) for w in (a, b)
    ]
    for t in threads:
        t.start()
    wait_for(lambda: len(a.rounds) >= 2)
    relay.flowing.clear()
    time.sleep(1.2)  # the flap itself: 60 % of the timeout (TCP's back-off stretches it)
    relay.flowing.set()
    for t in threads:
        t.join(30)
    assert len(a.rounds) == len(b.rounds) == 12
    assert a.error is None and b.error is None
    assert all(r.participants == ("a", "b") for r in a.rounds + b.rounds)
    assert a.cross.stats().heals == 0 and b.cross.stats().heals == 1  # b's only heal: the start
    a.cross.close()
    b.cross.close()


def test_a_long_flap_splits_the_sites_then_one_heals_from_the_other(
    base_port: int, relays: list[Relay]
) -> None:
    a, b, relay = relayed_pair(base_port, relays)
    stop = threading.Event()
    threads = [
        threading.Thread(target=train_until, args=(w, 100_000, stop, 0.002), daemon=True)
        for w in (a, b)
    ]
    for t in threads:
        t.start()
    wait_for(lambda: len(a.rounds) >= 2)
    relay.flowing.clear()  # cut until both went on alone
    wait_for(lambda: a.rounds[-1].participants == ("a",) and b.rounds[-1].participants == ("b",))
    relay.flowing.set()
    heals = a.cross.stats().heals + b.cross.stats().heals
    wait_for(lambda: a.cross.stats().heals + b.cross.stats().heals > heals)
    wait_for(
        lambda: a.rounds[-1].participants == ("a", "b") and b.rounds[-1].participants == ("a", "b")
    )
    stop.set()
    a.cross.close()
    b.cross.close()
    for t in threads:
        t.join(20)
    assert a.error is None or isinstance(a.error, UnavailableError)


def test_sites_with_different_models_are_refused_on_both_sides(base_port: int) -> None:
    cfg = fast_config(rendezvous_timeout_s=10.0)
    a = make_worker(SITES, 0, base_port, cfg, width=64)
    b = make_worker(SITES, 1, base_port, cfg, width=32)
    errors: list[BaseException] = []

    def start(w: Worker) -> None:
        try:
            w.cross.start()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    run_threads(lambda: start(a), lambda: start(b))
    assert len(errors) == 2
    for e in errors:
        assert isinstance(e, ValidationError)
        assert "another model or sync config" in e.message
    a.cross.close()
    b.cross.close()


def test_a_rendezvous_that_never_completes_names_the_missing_site(base_port: int) -> None:
    a = make_worker(SITES, 0, base_port, fast_config(rendezvous_timeout_s=0.5))
    with pytest.raises(UnavailableError) as err:
        a.cross.start()
    assert "did not complete in 0.5 s" in err.value.message
    assert f"b (127.0.0.1:{base_port + 16})" in err.value.message
    a.cross.close()


class RawPeer:
    """Site b spoken by hand: hello, join, then whatever the test sends."""

    def __init__(self, a: Worker) -> None:
        topo = a.cross.topology
        deadline = time.monotonic() + 10
        while True:  # a's mesh starts listening in its own thread
            try:
                self.sock = socket.create_connection(("127.0.0.1", topo.port(0)), timeout=10)
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline, "site a never listened"
                time.sleep(0.01)
        read_frame(self.sock)  # a's hello
        write_frame(
            self.sock,
            {
                "kind": "hello",
                "rank": 1,
                "site": "b",
                "digest": a.cross.digest,
                "lineage": Lineage().to_json(),
            },
        )

    def next(self, kind: str) -> tuple[dict[str, object], bytes]:
        while True:
            (header, payload), _ = read_frame(self.sock)
            if header["kind"] == kind:
                return header, payload


def site_a_and_a_hand_spoken_b(base_port: int) -> tuple[Worker, RawPeer, int]:
    """Site a started, with b spoken by hand and healed from it; a's parameter count."""
    a = make_worker(SITES, 0, base_port, fast_config())
    started = threading.Thread(target=a.cross.start, daemon=True)
    started.start()
    peer = RawPeer(a)
    numel = sum(p.numel() for p in a.model.parameters())
    write_frame(peer.sock, {"kind": "join", "lo": 0, "hi": numel})
    peer.next("state")
    started.join(10)
    return a, peer, numel


def test_a_non_finite_update_is_refused_with_an_error_and_never_averaged(base_port: int) -> None:
    a, peer, numel = site_a_and_a_hand_spoken_b(base_port)
    half = numel // 2  # shard 0 (site a leads it) and shard 1 (site b leads it)
    payload = bytearray(encode(torch.zeros(half), 8, 4096))
    payload[0:4] = struct.pack("<f", float("nan"))  # the first block's scale
    write_frame(
        peer.sock,
        {
            "kind": "contrib",
            "round": 0,
            "shard": 0,
            "tokens": 80,
            "numel": half,
            "lineage": "genesis",
        },
        bytes(payload),
    )
    before = a.model.weight.detach().clone()
    training = threading.Thread(target=train_until, args=(a, 5), daemon=True)
    training.start()
    theirs, part = peer.next("contrib")  # a's part of shard 1: b averages it alone
    assert theirs["shard"] == 1
    write_frame(
        peer.sock,
        {"kind": "result", "round": 0, "shard": 1, "participants": [0], "tokens": 80},
        part,
    )
    training.join(20)
    assert a.error is None
    header, _ = peer.next("result")
    assert "not finite" in str(header["rejected"])
    assert a.rounds[0].participants == ("a",)
    assert torch.isfinite(a.model.weight).all()
    assert not torch.equal(before, a.model.weight)
    peer.sock.close()
    a.cross.close()


def test_a_corrupt_frame_cuts_the_peer_off_and_the_site_goes_on(base_port: int) -> None:
    a, peer, numel = site_a_and_a_hand_spoken_b(base_port)
    frame = bytearray()

    class Capture:
        def sendall(self, data: bytes) -> None:
            frame.extend(data)

    write_frame(
        Capture(),
        {
            "kind": "contrib",
            "round": 0,
            "tokens": 80,
            "numel": numel,  # type: ignore[arg-type]
            "lineage": "genesis",
        },
        encode(torch.zeros(numel), 8, 4096),
    )
    frame[40] ^= 0xFF  # a bit flipped on the way
    peer.sock.sendall(bytes(frame))
    train_until(a, 10)
    assert a.error is None
    assert [r.participants for r in a.rounds] == [("a",), ("a",)]
    peer.sock.settimeout(5)
    with pytest.raises((ConnectionError, OSError)):
        peer.next("result")
    peer.sock.close()
    a.cross.close()


def test_streaming_fragments_overlap_compute_and_keep_the_sites_on_one_line(
    base_port: int,
) -> None:
    cfg = fast_config(sync_every=10, fragments=2, overlap_steps=3, merge_alpha=0.5)
    workers = [make_worker(SITES, r, base_port, cfg) for r in range(2)]
    start_all(*workers)

    def run(w: Worker) -> None:
        train_until(w, 40)
        last = w.cross.finish()
        if last is not None:
            w.rounds.append(last)

    run_threads(*(lambda w=w: run(w) for w in workers))
    a, b = workers
    assert a.error is None and b.error is None
    assert [r.number for r in a.rounds] == list(range(8))  # one fragment every 5 steps
    assert all(r.participants == ("a", "b") for r in a.rounds + b.rounds)
    assert torch.equal(a.cross._global, b.cross._global)  # one line: the same global weights
    assert a.cross.mesh.lineage.id == b.cross.mesh.lineage.id
    # A round carries one fragment, half of the update, in int8: a site sends and receives
    # the fragment once (a whole update's round moves 2 × numel bytes).
    numel = sum(p.numel() for p in a.model.parameters())
    s = a.cross.stats()
    per_round = (s.sync_sent + s.sync_received) / 8
    assert per_round == pytest.approx(numel, rel=0.01)
    for w in workers:
        w.cross.close()


def test_a_restarted_site_of_three_heals_once_and_nobody_waits_on_anybody(base_port: int) -> None:
    """Three sites; c is lost and a fresh c comes back.  It heals once, from the heaviest
    site, and no round waits for a site that is healing (an outside review found c healing
    twice — again from b, met after its first heal — while a waited for c and b for a: all
    three stuck until the sync timeout)."""
    sites = ("a", "b", "c")
    cfg = fast_config(sync_timeout_s=15.0, heal_timeout_s=15.0)
    a, b, c = (make_worker(sites, r, base_port, cfg) for r in range(3))
    start_all(a, b, c)

    def c_dies() -> None:
        train_until(c, 10)
        c.cross.close()

    run_threads(lambda: train_until(a, 20), lambda: train_until(b, 20), c_dies)
    c2 = make_worker(sites, 2, base_port, cfg, seed=99)
    threads = [
        threading.Thread(target=train_until, args=(w, 60, None, 0.002), daemon=True) for w in (a, b)
    ]
    for t in threads:
        t.start()
    c2.cross.start()
    train_until(c2, 60, step_s=0.002)
    for t in threads:
        t.join(30)
    for w in (a, b, c2):
        assert w.error is None, w.error
    assert c2.cross.stats().heals == 1
    assert a.rounds[-1].participants == ("a", "b", "c")
    for w in (b, c2):
        for pa, pw in zip(a.model.parameters(), w.model.parameters(), strict=True):
            assert torch.equal(pa, pw)
    for w in (a, b, c2):
        w.cross.close()

"""Shared pieces of the training tests: free ports, a gang of sites inside one process
(each site a thread with its own mesh on loopback), and a TCP relay that can stall."""

from __future__ import annotations

import contextlib
import random
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
import torch
from torch import nn

from onecluster.training import CrossSite, Round, SyncConfig, Topology


def free_base_port() -> int:
    """A base port whose 256 ports look free on 127.0.0.1 and 127.0.0.2."""
    for _ in range(200):
        base = random.randrange(20000, 60000 - 256, 256)
        ok = True
        for offset in (0, 1, 2, 16, 17, 32, 240, 241):
            for host in ("127.0.0.1", "127.0.0.2"):
                with socket.socket() as s:
                    try:
                        s.bind((host, base + offset))
                    except OSError:
                        ok = False
        if ok:
            return base
    raise RuntimeError("no free port range")


@pytest.fixture
def base_port() -> int:
    return free_base_port()


def small_model(seed: int, width: int = 64) -> nn.Module:
    """4,096 + 64 parameters: one int8 block of 4,096 values and one of 64."""
    torch.manual_seed(seed)
    return nn.Linear(width, width)


def fast_config(**changes: object) -> SyncConfig:
    base: dict[str, object] = {
        "sync_every": 5,
        "heartbeat_s": 0.1,
        "peer_timeout_s": 3.0,
        "sync_timeout_s": 20.0,
        "rendezvous_timeout_s": 20.0,
        "heal_timeout_s": 20.0,
    }
    base.update(changes)
    return SyncConfig(**base)  # type: ignore[arg-type]


@dataclass
class Worker:
    """One site's worker: its model, optimizer and CrossSite, and the rounds it saw."""

    cross: CrossSite
    model: nn.Module
    rounds: list[Round] = field(default_factory=list)
    error: BaseException | None = None

    def train(self, steps: int, seed: int, stop: threading.Event | None = None) -> None:
        gen = torch.Generator().manual_seed(seed)
        target = torch.linspace(-1, 1, 64)
        try:
            for _ in range(steps):
                if stop is not None and stop.is_set():
                    return
                x = torch.randn(16, 64, generator=gen)
                loss = ((self.model(x) - target) ** 2).mean()
                loss.backward()
                done = self.cross.step(16)
                if done is not None:
                    self.rounds.append(done)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            self.error = exc


def make_worker(
    sites: tuple[str, ...],
    rank: int,
    base_port: int,
    config: SyncConfig,
    *,
    seed: int = 0,
    addresses: dict[str, str] | None = None,
    width: int = 64,
) -> Worker:
    model = small_model(seed + rank, width)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    topo = Topology(sites=sites, site_rank=rank, addresses=addresses or {}, base_port=base_port)
    return Worker(CrossSite(model, opt, config, topo), model)


def run_threads(*jobs: Callable[[], None], timeout: float = 60) -> None:
    threads = [threading.Thread(target=j, daemon=True) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a site's thread did not finish"


class Relay:
    """A TCP relay from ``listen`` to ``target``, and UDP relays for ``datagrams`` (listen →
    target pairs), that can stall: while stalled the TCP relay moves no byte either way and
    the UDP relays drop every datagram (a cut circuit, as the peers see it); then TCP
    delivers what waited."""

    def __init__(
        self,
        listen: tuple[str, int],
        target: tuple[str, int],
        datagrams: tuple[tuple[tuple[str, int], tuple[str, int]], ...] = (),
    ) -> None:
        self.target = target
        self.flowing = threading.Event()
        self.flowing.set()
        self._server = socket.create_server(listen)
        self._server.settimeout(0.1)
        self._closed = threading.Event()
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()
        for src, dst in datagrams:
            udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            udp.bind(src)
            udp.settimeout(0.1)
            self._socks.append(udp)
            threading.Thread(target=self._forward, args=(udp, dst), daemon=True).start()

    def _forward(self, udp: socket.socket, dst: tuple[str, int]) -> None:
        while not self._closed.is_set():
            try:
                data, _ = udp.recvfrom(2048)
            except TimeoutError:
                continue
            except OSError:
                return
            if self.flowing.is_set():
                with contextlib.suppress(OSError):
                    udp.sendto(data, dst)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            self._socks += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                data = src.recv(65536)
                if not data:
                    break
                self.flowing.wait()
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._closed.set()
        self.flowing.set()
        self._server.close()
        for s in self._socks:
            with contextlib.suppress(OSError):
                s.close()


@pytest.fixture
def relays() -> Iterator[list[Relay]]:
    made: list[Relay] = []
    yield made
    for r in made:
        r.close()

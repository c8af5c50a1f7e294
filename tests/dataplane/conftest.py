"""Two sites' storage on loopback: a source store with a registered tree, grants for it."""

from __future__ import annotations

import contextlib
import random
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import zstandard

from onecluster.dataplane import DataServer, Pacer, Served
from onecluster.storage import DataStore, scan_tree
from onecluster.transfer import Manifest, encode_manifest


def make_tree(top: Path, *, files: int = 24, seed: int = 3) -> Path:
    rng = random.Random(seed)
    top.mkdir(parents=True)
    for i in range(files):
        size = rng.choice([0, 100, 70_000, 1_500_000])
        (top / f"f{i:02}.bin").write_bytes(rng.randbytes(size))
    (top / "text.txt").write_bytes(b"compressible line\n" * 50_000)
    return top


@dataclass
class Grants:
    """Grants of a test: ticket → Served, by transfer id."""

    table: dict[tuple[str, str], Served] = field(default_factory=dict)

    def served(self, transfer: str, ticket: str) -> Served | None:
        return self.table.get((transfer, ticket))


@dataclass
class Source:
    store: DataStore
    manifest: Manifest
    tree: Path
    server: DataServer
    grants: Grants

    def serve(
        self,
        transfer: str = "t1",
        ticket: str = "secret",
        rate_bps: float | None = None,
        rates: dict[str, float] | None = None,
    ) -> None:
        """Grant the transfer; each path paced at ``rates[path]``, else ``rate_bps``."""
        reader = self.store.reader("ds", self.manifest.root)
        packed = zstandard.ZstdCompressor().compress(encode_manifest(self.manifest))
        pacers: dict[str, Pacer] = {}

        def pacer(path: str) -> Pacer:
            return pacers.setdefault(path, Pacer((rates or {}).get(path, rate_bps)))

        self.grants.table[(transfer, ticket)] = Served(
            relay=False, manifest=packed, source=reader, pacer=pacer
        )


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Source]:
    tree = make_tree(tmp_path / "tree")
    manifest = scan_tree(tree)
    store = DataStore(tmp_path / "src")
    store.register("ds", tree, manifest)
    grants = Grants()
    server = DataServer(grants, host="127.0.0.1")
    yield Source(store, manifest, tree, server, grants)
    server.close()


class Proxy:
    """A TCP proxy on loopback that can corrupt bytes or go silent (a cut circuit)."""

    def __init__(self, target: tuple[str, int], *, flip_every: int = 0) -> None:
        self._target = target
        self._flip_every = flip_every
        self.silent = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            onward = socket.create_connection(self._target)
            self._socks += [conn, onward]
            threading.Thread(target=self._pipe, args=(conn, onward, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(onward, conn, True), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, downstream: bool) -> None:
        seen = 0
        try:
            while True:
                data = bytearray(src.recv(65536))
                if not data:
                    break
                if self.silent.is_set():
                    continue  # dropped, as on a cut circuit: nobody is told
                if downstream and self._flip_every:
                    for i in range(len(data)):
                        if (seen + i) % self._flip_every == self._flip_every - 1:
                            data[i] ^= 0xFF
                seen += len(data)
                dst.sendall(data)
        except OSError:
            pass

    def reset(self) -> None:
        """Reset every connection through it (new ones still pass): a circuit that flapped."""
        for sock in list(self._socks):
            with contextlib.suppress(OSError):
                sock.close()

    def close(self) -> None:
        self._listener.close()
        for sock in self._socks:
            with contextlib.suppress(OSError):
                sock.close()

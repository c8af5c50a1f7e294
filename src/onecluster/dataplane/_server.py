"""The data endpoint of an agent: serves chunks of the transfers it is the source of, and
relays the connections of transfers that pass through its site.

One listening socket (all addresses of the site: every circuit's and the service address)
and a thread per connection.  A connection is served only when its hello presents the
ticket of a transfer the server ordered this agent to serve or relay (:class:`Grants`); a
relay connects onwards only to the hop the hello names, and only for such a transfer.

What it serves and relays is counted into ``metrics`` (:class:`DataPlaneMetrics`), labelled
by the receiving site and the path's kind as the fetch's hello names them.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import zstandard

from onecluster.dataplane import _protocol as wire
from onecluster.dataplane._metrics import DataPlaneMetrics, site_label
from onecluster.dataplane._pacing import Pacer
from onecluster.dataplane._sockets import connect, tune
from onecluster.errors import PlatformError
from onecluster.transfer import DIGEST_SIZE

__all__ = ["ChunkSource", "DataServer", "Grants", "Served"]

_log = logging.getLogger("onecluster.dataplane")

#: Seconds a connection may sit idle before the server drops it (a client that vanished).
_IDLE_S = 120.0
_SPLICE = 1024 * 1024


class ChunkSource(Protocol):
    """Where a served version's chunks come from (:class:`onecluster.storage.SourceReader`)."""

    def read(self, chunk: bytes) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Served:
    """What a ticket allows: relaying, or serving ``source``'s chunks and its ``manifest``
    (zstd-compressed), each path paced by ``pacer(path)``."""

    relay: bool
    manifest: bytes = b""
    source: ChunkSource | None = None
    pacer: Callable[[str], Pacer] = lambda _path: Pacer(None)


class Grants(Protocol):
    """The transfers this agent serves or relays now."""

    def served(self, transfer: str, ticket: str) -> Served | None: ...


class DataServer:
    """Listens on ``host:port`` (port 0: any free one, see :attr:`port`) until :meth:`close`;
    counts into ``metrics`` (the process's, else its own)."""

    def __init__(
        self,
        grants: Grants,
        *,
        host: str = "0.0.0.0",  # noqa: S104 - every circuit's address
        port: int = 0,
        metrics: DataPlaneMetrics | None = None,
    ) -> None:
        self._grants = grants
        self.metrics = metrics if metrics is not None else DataPlaneMetrics()
        self._listener = socket.create_server((host, port), reuse_port=False, backlog=128)
        self._listener.settimeout(0.5)
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept, name="data-server", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop listening and drop every connection."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._listener.close()
        with self._lock:
            conns = list(self._open)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                continue
            with self._lock:
                self._open.add(conn)
            threading.Thread(
                target=self._serve, args=(conn, peer), name=f"data-{peer[0]}", daemon=True
            ).start()

    def _serve(self, conn: socket.socket, peer: Any) -> None:
        try:
            conn.settimeout(_IDLE_S)
            tune(conn)
            kind, header = wire.read_hello(conn)
            transfer, ticket = str(header.get("transfer", "")), str(header.get("ticket", ""))
            try:
                served = self._grants.served(transfer, ticket)
            except PlatformError as exc:
                wire.write_status(conn, False, exc.message)
                return
            if served is None or served.relay != (kind is wire.Kind.RELAY):
                wire.write_status(conn, False, f"transfer {transfer!r} is not served here")
                return
            if kind is wire.Kind.RELAY:
                self._relay(conn, header)
            else:
                assert served.source is not None
                wire.write_status(conn, True)
                flow = (
                    site_label(header.get("site")),
                    "relay" if header.get("relayed") else "direct",
                )
                streams = self.metrics.streams.labels("serve", *flow)
                streams.inc()
                try:
                    _Session(conn, served, str(header.get("path", "")), self.metrics, flow).run()
                finally:
                    streams.dec()
        except (OSError, ConnectionError, PlatformError) as exc:
            _log.debug("data connection from %s ended: %s", peer, exc)
        finally:
            with self._lock:
                self._open.discard(conn)
            conn.close()

    def _relay(self, conn: socket.socket, header: dict[str, Any]) -> None:
        """Connect to the next hop, pass the inner hello on, then splice both ways."""
        hop = header.get("to") or {}
        inner = header.get("inner")
        if not isinstance(hop, dict) or not isinstance(inner, dict):
            wire.write_status(conn, False, "a relay hello needs 'to' and 'inner'")
            return
        try:
            onward = connect(str(hop.get("address")), int(hop.get("port", 0)), timeout_s=10.0)
        except (OSError, ValueError) as exc:
            wire.write_status(conn, False, f"the relay cannot reach {hop}: {exc}")
            return
        with self._lock:
            self._open.add(onward)
        try:
            onward.settimeout(_IDLE_S)
            kind = wire.Kind.RELAY if "to" in inner else wire.Kind.FETCH
            wire.write_hello(onward, kind, inner)
            # The next hop's status reaches the client through the splice.
            back = threading.Thread(target=self._pipe, args=(onward, conn), daemon=True)
            back.start()
            self._pipe(conn, onward)
            back.join()
        finally:
            with self._lock:
                self._open.discard(onward)
            onward.close()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        buf = bytearray(_SPLICE)
        view = memoryview(buf)
        relayed = self.metrics.relayed_bytes
        try:
            while True:
                n = src.recv_into(view)
                if n == 0:
                    break
                dst.sendall(view[:n])
                relayed.inc(n)
        except OSError:
            pass
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _Session:
    """One fetch connection: answers manifest and chunk requests until the client leaves."""

    def __init__(
        self,
        conn: socket.socket,
        served: Served,
        path: str,
        metrics: DataPlaneMetrics,
        flow: tuple[str, str],
    ) -> None:
        self._conn = conn
        self._served = served
        self._sent_bytes = metrics.sent_bytes.labels(*flow)
        self._sent_chunks = metrics.chunks_served.labels(*flow)
        self._pacer = served.pacer(path)
        self._zstd = zstandard.ZstdCompressor(level=1)
        self._futile = 0  # compression attempts in a row that did not pay
        self._skip = 0

    def run(self) -> None:
        while True:
            try:
                op = self._conn.recv(1)
            except TimeoutError:
                return
            if not op:
                return
            if op == wire.MANIFEST:
                self._conn.sendall(wire.LENGTH.pack(len(self._served.manifest)))
                self._conn.sendall(self._served.manifest)
            elif op == wire.CHUNKS:
                (count,) = wire.COUNT.unpack(wire.read_exact(self._conn, wire.COUNT.size))
                if count > wire.MAX_BATCH:
                    raise wire.ProtocolError(f"a request of {count} chunks is over the limit")
                raw = wire.read_exact(self._conn, count * DIGEST_SIZE)
                for i in range(count):
                    self._send(raw[i * DIGEST_SIZE : (i + 1) * DIGEST_SIZE])
            else:
                raise wire.ProtocolError(f"unknown request {op!r}")

    def _send(self, chunk: bytes) -> None:
        source = self._served.source
        assert source is not None
        try:
            data = source.read(chunk)
        except PlatformError as exc:
            reason = exc.message.encode()
            self._conn.sendall(wire.frame_head(chunk, wire.Codec.ERROR, 0, len(reason)) + reason)
            return
        codec, payload = self._pack(data)
        self._pacer.take(len(payload))
        self._conn.sendall(wire.frame_head(chunk, codec, len(data), len(payload)))
        self._conn.sendall(payload)
        self._sent_bytes.inc(len(payload))
        self._sent_chunks.inc()

    def _pack(self, data: bytes) -> tuple[wire.Codec, bytes]:
        """zstd where that pays (≥ 10 % smaller); after eight futile tries in a row, the
        next 64 chunks go raw before trying again (already-compressed data costs no CPU)."""
        if self._skip:
            self._skip -= 1
            return wire.Codec.RAW, data
        packed = self._zstd.compress(data)
        if len(packed) <= len(data) * 0.9:
            self._futile = 0
            return wire.Codec.ZSTD, packed
        self._futile += 1
        if self._futile >= 8:
            self._futile, self._skip = 0, 64
        return wire.Codec.RAW, data

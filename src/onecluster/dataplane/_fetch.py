"""Pulling a transfer's chunks from the source over every path at once.

Each path runs a few streams (:func:`onecluster.transfer.streams_for`); each stream keeps
up to three requests in flight, so a long circuit never idles between batches, and takes
its batches from one shared :class:`~onecluster.dataplane._work.Work`, so a faster path
simply takes more.  A stream whose path breaks — refused, reset, or silent for
``stall_s`` — gives its unfinished chunks back to the others and reconnects with backoff
(0.2 s doubling to 10 s: the first tries come soon, since a source may get its order a sync
after the destination), for as long as the fetch lasts: a circuit cut for minutes costs
only time.  A chunk that arrives corrupt is dropped and fetched again; a chunk the source
cannot serve (its file changed there) ends the fetch with that error.

Besides its own counters (for the transfer's report), a fetch counts into the process's
:class:`~onecluster.dataplane._metrics.DataPlaneMetrics`, labelled by the source site and
each path's kind.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import zstandard

from onecluster.dataplane import _protocol as wire
from onecluster.dataplane._metrics import DataPlaneMetrics, path_kind
from onecluster.dataplane._sockets import connect
from onecluster.dataplane._work import Work
from onecluster.errors import IntegrityError, PlatformError, UnavailableError
from onecluster.transfer import ChunkRef, streams_for

__all__ = ["ChunkSink", "Fetch", "PathStats", "Route", "fetch_manifest"]

_log = logging.getLogger("onecluster.dataplane")

_DEPTH = 3
#: A request's bytes: at most 8 MiB, less near the end so that every stream gets a share.
_BATCH_BYTES = 8 * 1024 * 1024
_MIN_BATCH_BYTES = 256 * 1024
_BATCH_COUNT = 1024
#: Corrupt chunks from one connection before it is dropped.
_CORRUPT_LIMIT = 8
_MAX_MANIFEST = 1 << 30


class ChunkSink(Protocol):
    """Where verified chunks go (:class:`onecluster.storage.PartialReplica`): ``write``
    checks the digest (raising :class:`IntegrityError`) and says whether it was new."""

    def write(self, chunk: bytes, data: bytes) -> bool: ...


@dataclass(frozen=True, slots=True)
class Route:
    """A path to the source: ``hops`` are ``(address, port)``, the first one connected."""

    name: str
    hops: tuple[tuple[str, int], ...]
    circuits: tuple[str, ...] = ()
    rtt_s: float = 0.0
    rate_bps: float | None = None


@dataclass(slots=True)
class PathStats:
    """What one path carried: payload bytes on the wire, chunks, open streams, its state."""

    name: str
    circuits: tuple[str, ...]
    bytes: int = 0
    chunks: int = 0
    corrupt: int = 0
    streams: int = 0
    state: str = "connecting"
    error: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def _hello(
    route: Route, transfer: str, ticket: str, path: str, site: str
) -> tuple[wire.Kind, dict[str, Any]]:
    """The hello for ``route``'s first hop: the fetch, wrapped in a relay per extra hop.  The
    fetch names the receiving ``site`` and whether it comes through relays (the source's
    metrics' labels)."""
    header: dict[str, Any] = {
        "transfer": transfer,
        "ticket": ticket,
        "path": path,
        "site": site,
        "relayed": len(route.hops) > 1,
    }
    kind = wire.Kind.FETCH
    for address, port in reversed(route.hops[1:]):
        header = {
            "transfer": transfer,
            "ticket": ticket,
            "path": path,
            "to": {"address": address, "port": port},
            "inner": header,
        }
        kind = wire.Kind.RELAY
    return kind, header


def open_session(
    route: Route,
    transfer: str,
    ticket: str,
    *,
    timeout_s: float,
    priority: str = "bulk",
    site: str = "",
) -> socket.socket:
    """A fetch session with the source over ``route`` for ``site`` (:class:`OSError`,
    :class:`ConnectionError`; :class:`UnavailableError` when a hop refuses it)."""
    address, port = route.hops[0]
    sock = connect(address, port, timeout_s=timeout_s, priority=priority)
    try:
        kind, header = _hello(route, transfer, ticket, route.name, site)
        wire.write_hello(sock, kind, header)
        ok, message = wire.read_status(sock)
        if not ok:
            raise UnavailableError(f"path {route.name} refused the transfer: {message}")
    except BaseException:
        sock.close()
        raise
    return sock


def fetch_manifest(route: Route, transfer: str, ticket: str, *, timeout_s: float = 30.0) -> bytes:
    """The version's manifest bytes from the source over ``route`` (decompressed)."""
    sock = open_session(route, transfer, ticket, timeout_s=timeout_s)
    with sock:
        sock.sendall(wire.MANIFEST)
        (size,) = wire.LENGTH.unpack(wire.read_exact(sock, wire.LENGTH.size))
        if size > _MAX_MANIFEST:
            raise wire.ProtocolError(f"the source announces a manifest of {size} bytes")
        data = wire.read_exact(sock, size)
    try:
        return zstandard.ZstdDecompressor().decompress(data, max_output_size=_MAX_MANIFEST)
    except zstandard.ZstdError as exc:
        raise IntegrityError(f"the manifest from path {route.name} is corrupt: {exc}") from exc


class Fetch:
    """Brings ``chunks`` of transfer ``transfer`` into ``sink`` over ``routes``.

    :meth:`start` it, follow :meth:`paths` and the counters, :meth:`set_routes` when the
    route table changes, :meth:`wait` for the end; :attr:`error` is the reason it stopped
    early (a chunk the source cannot serve, a full disk), if any.  ``site`` is this site,
    ``peer`` the source's (labels of ``metrics``: the process's, else the fetch's own).
    """

    def __init__(
        self,
        *,
        transfer: str,
        ticket: str,
        sink: ChunkSink,
        chunks: list[ChunkRef],
        routes: list[Route],
        window_bytes: int,
        priority: str = "bulk",
        stall_s: float = 5.0,
        site: str = "",
        peer: str = "",
        metrics: DataPlaneMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._transfer = transfer
        self._site = site
        self._peer = peer or "unknown"
        self.metrics = metrics if metrics is not None else DataPlaneMetrics()
        self._clock = clock
        self._ticket = ticket
        self._sink = sink
        self._work = Work(chunks)
        self._window = window_bytes
        self._priority = priority
        self._stall_s = stall_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._routes: dict[str, Route] = {}
        self._stats: dict[str, PathStats] = {}
        self._threads: list[threading.Thread] = []
        self._socks: dict[int, tuple[str, socket.socket]] = {}
        self.error: PlatformError | None = None
        self.bytes_wire = 0
        self.chunks_wire = 0
        self.bytes_new = 0
        self._initial = list(routes)
        self._planned = 0  # streams of the current routes

    # -- control ----------------------------------------------------------------------------

    def start(self) -> None:
        self.set_routes(self._initial)

    def set_routes(self, routes: list[Route]) -> None:
        """Follow a new set of paths: streams of a path that left (or changed) give their
        chunks back and end; a new path gets its streams."""
        wanted = {r.name: r for r in routes}
        with self._lock:
            for name, old in list(self._routes.items()):
                if wanted.get(name) != old:
                    del self._routes[name]
                    for _key, (path, sock) in list(self._socks.items()):
                        if path == name:
                            with contextlib.suppress(OSError):
                                sock.shutdown(socket.SHUT_RDWR)
            added = set()
            for name, route in wanted.items():
                if name in self._routes:
                    continue
                added.add(name)
                self._routes[name] = route
                stats = self._stats.setdefault(name, PathStats(name, route.circuits))
                stats.state, stats.error = "connecting", None
            self._planned = sum(
                streams_for(r.rate_bps, r.rtt_s, self._window) for r in self._routes.values()
            )
            for name, route in wanted.items():
                if name not in added:
                    continue
                for i in range(streams_for(route.rate_bps, route.rtt_s, self._window)):
                    thread = threading.Thread(
                        target=self._stream, args=(route,), name=f"fetch-{name}-{i}", daemon=True
                    )
                    self._threads.append(thread)
                    thread.start()

    def stop(self) -> None:
        """End every stream now (the sink keeps what was written)."""
        self._stop.set()
        with self._lock:
            socks = [s for _, s in self._socks.values()]
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in list(self._threads):
            thread.join(timeout=5)

    def wait(self, timeout_s: float) -> bool:
        """Whether the fetch ended (every chunk in, or an error) within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while not self.finished:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._work.wait(min(left, 0.2))
        return True

    @property
    def finished(self) -> bool:
        return self.error is not None or self._work.finished

    @property
    def chunks_done(self) -> int:
        return self._work.done_count

    def paths(self, *, current_only: bool = True) -> list[PathStats]:
        """A snapshot of every path's counters (with ``current_only=False``, also those of
        paths the fetch no longer uses)."""
        with self._lock:
            return [
                PathStats(
                    s.name, s.circuits, s.bytes, s.chunks, s.corrupt, s.streams, s.state, s.error
                )
                for s in self._stats.values()
                if s.name in self._routes or not current_only
            ]

    # -- streams ----------------------------------------------------------------------------

    def _alive(self, route: Route) -> bool:
        with self._lock:
            current = self._routes.get(route.name)
        return not self._stop.is_set() and self.error is None and current == route

    def _stream(self, route: Route) -> None:
        stats = self._stats[route.name]
        flow = (self._peer, path_kind(len(route.hops)))
        open_streams = self.metrics.streams.labels("fetch", *flow)
        for rare in (self.metrics.verify_failures, self.metrics.connect_retries):
            rare.labels(*flow)  # exported at 0 from now, so that the first one is an increase
        backoff = 0.2
        broke = False  # a session of this stream ended early: the next one is a reconnect
        while self._alive(route) and not self._work.finished:
            try:
                sock = open_session(
                    route,
                    self._transfer,
                    self._ticket,
                    timeout_s=max(self._stall_s, 4 * route.rtt_s),
                    priority=self._priority,
                    site=self._site,
                )
            except (OSError, PlatformError) as exc:
                self.metrics.connect_retries.labels(*flow).inc()
                self._note(stats, "down", str(exc))
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)
                continue
            backoff = 0.2
            if broke:
                self.metrics.reconnects.labels(*flow).inc()
            key = id(sock)
            with self._lock:
                self._socks[key] = (route.name, sock)
                stats.streams += 1
            open_streams.inc()
            self._note(stats, "running", None)
            try:
                sock.settimeout(max(self._stall_s, 4 * route.rtt_s))
                self._pull(sock, route, stats)
            except (OSError, ConnectionError, PlatformError) as exc:
                broke = True
                if self._alive(route):
                    self._note(stats, "stalled", str(exc))
                    _log.info("path %s of transfer %s broke: %s", route.name, self._transfer, exc)
            except Exception as exc:  # noqa: BLE001 - a bug: end the fetch, never hang it
                _log.exception("a stream of transfer %s failed unexpectedly", self._transfer)
                self._fail(PlatformError(f"unexpected {type(exc).__name__} in a stream: {exc}"))
            finally:
                with self._lock:
                    self._socks.pop(key, None)
                    stats.streams -= 1
                open_streams.dec()
                sock.close()

    def _note(self, stats: PathStats, state: str, error: str | None) -> None:
        with self._lock:
            if state != "running" and stats.streams > 0:
                return  # another stream of the path still works
            stats.state, stats.error = state, error

    def _pull(self, sock: socket.socket, route: Route, stats: PathStats) -> None:
        """Request and receive batches until nothing is left (or the path breaks)."""
        flight: deque[tuple[list[ChunkRef], float]] = deque()  # a batch, when it was asked
        steal = max(2 * self._stall_s, 8 * route.rtt_s)
        try:
            while self._alive(route):
                while len(flight) < _DEPTH:
                    batch = self._work.take(
                        max_bytes=self._batch_bytes(), max_count=_BATCH_COUNT, steal_after_s=steal
                    )
                    if not batch:
                        break
                    sock.sendall(wire.request_chunks([c.digest for c in batch]))
                    flight.append((batch, self._clock()))
                if not flight:
                    if self._work.finished:
                        return
                    self._work.wait(0.2)
                    continue
                batch, asked = flight[0]
                while batch:
                    self._receive(sock, batch[0], stats, route, asked)
                    batch.pop(0)
                flight.popleft()
        finally:
            self._work.give_back(c for b, _ in flight for c in b)

    def _batch_bytes(self) -> int:
        """Up to 8 MiB, but no more than a share of what is left for every stream's
        requests in flight, so that the last bytes are spread over every path too."""
        with self._lock:
            streams = max(self._planned, 1)
        share = self._work.pending_bytes // (streams * _DEPTH)
        return max(_MIN_BATCH_BYTES, min(_BATCH_BYTES, share))

    def _receive(
        self, sock: socket.socket, chunk: ChunkRef, stats: PathStats, route: Route, asked: float
    ) -> None:
        frame = wire.read_frame(sock)
        if frame.digest != chunk.digest:
            raise wire.ProtocolError("the source answered with another chunk than asked")
        if frame.codec is wire.Codec.ERROR:
            self._fail(IntegrityError(frame.payload.decode(errors="replace")))
            raise ConnectionError("the fetch stopped")
        with self._lock:
            self.bytes_wire += len(frame.payload)
            self.chunks_wire += 1
            stats.bytes += len(frame.payload)
            stats.chunks += 1
        flow = (self._peer, path_kind(len(route.hops)))
        self.metrics.received_bytes.labels(*flow).inc(len(frame.payload))
        self.metrics.chunks_fetched.labels(*flow).inc()
        try:
            data = frame.payload
            if frame.codec is wire.Codec.ZSTD:
                data = zstandard.ZstdDecompressor().decompress(
                    frame.payload, max_output_size=frame.raw_size
                )
            new = self._sink.write(chunk.digest, data)
        except (IntegrityError, zstandard.ZstdError) as exc:
            self.metrics.verify_failures.labels(*flow).inc()
            with self._lock:
                stats.corrupt += 1
                corrupt = stats.corrupt
            _log.warning(
                "transfer %s: %s (path %s); fetching it again", self._transfer, exc, stats.name
            )
            self._work.give_back([chunk])
            if corrupt % _CORRUPT_LIMIT == 0:
                raise ConnectionError(f"{corrupt} corrupt chunks on path {stats.name}") from exc
            return
        except PlatformError as exc:  # the disk: nothing more can be written
            self._fail(exc)
            raise ConnectionError("the fetch stopped") from exc
        self.metrics.chunks_verified.labels(*flow).inc()
        self.metrics.fetch_duration.labels(*flow).observe(self._clock() - asked)
        if new:
            with self._lock:
                self.bytes_new += len(data)
        self._work.done(chunk.digest)

    def _fail(self, exc: PlatformError) -> None:
        with self._lock:
            if self.error is None:
                self.error = exc
        self._work.give_back([])

"""One transfer received at this site, in a thread of its own: the manifest, the chunks the
site already holds (copied locally), then the rest over every path the server planned.

It carries on by itself through anything that can pass — a source or relay that vanishes, a
circuit cut for minutes, a restart of either agent — and ends only when the replica is
complete (``done``) or something no retry can mend happened (``failed``: the source's file
changed, the disk is full, the manifest is not the version's).  Whatever was verified is
kept: the next try, in this process or the next, starts from there.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from onecluster.dataplane import DataPlaneMetrics, Fetch, Route, fetch_manifest
from onecluster.errors import IntegrityError, PlatformError
from onecluster.schema import PathReport, ReceiveOrder, TransferReport
from onecluster.storage import DataStore, PartialReplica
from onecluster.transfer import ChunkRef, Manifest, decode_manifest, digest

__all__ = ["Receive"]

_log = logging.getLogger("onecluster.agent")

#: How long a fetch may run without a route update before the job looks again.
_TURN_S = 0.5


@dataclass(frozen=True, slots=True)
class _Totals:
    bytes_total: int
    chunks_total: int


def routes_of(order: ReceiveOrder) -> list[Route]:
    """The order's paths as the data plane's routes."""
    return [
        Route(
            name=p.name,
            hops=tuple((h.address, h.port) for h in p.hops),
            circuits=tuple(p.circuits),
            rtt_s=p.rtt_s,
            rate_bps=p.rate_bps,
        )
        for p in order.paths
        if p.hops
    ]


class Receive:
    """Receives ``order`` into ``store`` until done, failed or :meth:`stop`; at ``site``,
    counting into ``metrics`` (the site's data plane's)."""

    def __init__(
        self,
        order: ReceiveOrder,
        store: DataStore,
        *,
        window_bytes: int,
        site: str = "",
        metrics: DataPlaneMetrics | None = None,
    ) -> None:
        self.order = order
        self._site = site
        self._metrics = metrics
        self._store = store
        self._window = window_bytes
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._fetch: Fetch | None = None
        self._replica: PartialReplica | None = None
        self._totals: _Totals | None = None
        self.state = "running"
        self.error: str | None = None
        self.bytes_local = 0
        self._thread = threading.Thread(target=self._run, name=f"receive-{order.id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def update(self, order: ReceiveOrder) -> None:
        """Follow the server's new plan for the transfer (its paths change with the routes)."""
        with self._lock:
            changed = order.paths != self.order.paths
            self.order = order
            fetch = self._fetch
        if changed and fetch is not None:
            fetch.set_routes(routes_of(order))

    def stop(self) -> None:
        """Stop now; what was verified is kept."""
        self._stop.set()
        with self._lock:
            fetch = self._fetch
        if fetch is not None:
            fetch.stop()
        self._thread.join(timeout=10)

    @property
    def ended(self) -> bool:
        return self.state in ("done", "failed")

    # -- the work ---------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            manifest = self._manifest()
            if manifest is None:
                return
            with self._lock:
                self._totals = _Totals(manifest.bytes_total, len(manifest.chunks))
            held = self._store.index.replica(self.order.dataset, manifest.root)
            if held is not None and held.complete:  # done before: its report was lost
                self.state = "done"
                return
            replica = self._store.receive(self.order.dataset, manifest)
            needed = replica.open()
            with self._lock:
                self._replica = replica
            self._copy_local(replica, needed)
            if not self._fetch_rest(replica):
                return
            path = replica.finish()
            self.state = "done"
            _log.info("transfer %s: %s is complete in %s", self.order.id, self.order.dataset, path)
        except PlatformError as exc:
            self._fail(exc.message)
        except Exception as exc:  # noqa: BLE001 - a bug must end the job, not the agent
            _log.exception("transfer %s failed unexpectedly", self.order.id)
            self._fail(f"unexpected {type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                open_replica = self._replica
            if open_replica is not None:
                open_replica.close()  # whatever happened: its files are not held on

    def _fail(self, message: str) -> None:
        self.error = message
        self.state = "failed"
        _log.error("transfer %s failed: %s", self.order.id, message)

    def _manifest(self) -> Manifest | None:
        """The version's manifest: kept here already, or fetched from the source (waiting,
        with backoff, while no path works)."""
        root = bytes.fromhex(self.order.root)
        kept = self._store.manifest(root)
        if kept is not None:
            return kept
        backoff = 0.2
        while not self._stop.is_set():
            for route in routes_of(self.order):
                try:
                    raw = fetch_manifest(route, self.order.id, self.order.ticket)
                except (OSError, ConnectionError, PlatformError) as exc:
                    self.error = f"path {route.name}: {exc}"
                    continue
                try:
                    manifest = decode_manifest(raw, root=root)
                except IntegrityError as exc:
                    self.error = f"path {route.name}: {exc.message}"
                    continue  # another path may bring the real one
                self.error = None
                return manifest
            self.state = "waiting"
            self._stop.wait(backoff)
            backoff = min(backoff * 2, 10.0)
        return None

    def _copy_local(self, replica: PartialReplica, needed: list[ChunkRef]) -> None:
        """Chunks another replica at this site holds are copied, not fetched."""
        places = self._store.index.locate(c.digest for c in needed)
        for chunk, place in places.items():
            if self._stop.is_set():
                return
            try:
                with place.file.open("rb") as f:
                    f.seek(place.offset)
                    data = f.read(place.size)
            except OSError:
                continue
            if digest(data) != chunk:
                continue  # that copy went stale (its file was edited): fetch it instead
            if replica.write(chunk, data):
                self.bytes_local += len(data)
        replica.commit()

    def _fetch_rest(self, replica: PartialReplica) -> bool:
        """Fetch what is still needed; ``False`` when stopped or failed."""
        needed = replica.needed()
        if not needed:
            return True
        fetch = Fetch(
            transfer=self.order.id,
            ticket=self.order.ticket,
            sink=replica,
            chunks=needed,
            routes=routes_of(self.order),
            window_bytes=self._window,
            priority=self.order.priority,
            site=self._site,
            peer=self.order.src,
            metrics=self._metrics,
        )
        with self._lock:
            self._fetch = fetch
        fetch.start()
        while not fetch.wait(_TURN_S):
            if self._stop.is_set():
                fetch.stop()
                replica.commit()
                return False
            running = any(p.state == "running" for p in fetch.paths())
            self.state = "running" if running else "waiting"
        fetch.stop()
        replica.commit()
        if fetch.error is not None:
            self._fail(fetch.error.message)
            return False
        self.state = "running"
        return True

    # -- reports ----------------------------------------------------------------------------

    def report(self) -> TransferReport:
        """What the server should know of this transfer now."""
        with self._lock:
            fetch, replica, totals = self._fetch, self._replica, self._totals
        paths = fetch.paths() if fetch is not None else []
        return TransferReport(
            id=self.order.id,
            state=self.state,
            bytes_total=totals.bytes_total if totals else 0,
            bytes_done=self._done(replica.bytes_present if replica else 0, totals, "bytes"),
            bytes_sent=fetch.bytes_wire if fetch is not None else 0,
            bytes_local=self.bytes_local,
            chunks_total=totals.chunks_total if totals else 0,
            chunks_done=self._done(replica.chunks_present if replica else 0, totals, "chunks"),
            chunks_sent=fetch.chunks_wire if fetch is not None else 0,
            paths=[
                PathReport(name=p.name, bytes=p.bytes, streams=p.streams, state=p.state)
                for p in paths
            ],
            error=self.error if self.state in ("failed", "waiting") else None,
        )

    def _done(self, present: int, totals: _Totals | None, what: str) -> int:
        if self.state == "done" and totals is not None:
            return totals.bytes_total if what == "bytes" else totals.chunks_total
        return present

    def circuit_bytes(self) -> dict[str, int]:
        """Bytes this transfer moved per circuit (every circuit of a path counts its bytes)."""
        with self._lock:
            fetch = self._fetch
        out: dict[str, int] = {}
        for path in fetch.paths(current_only=False) if fetch is not None else []:
            for circuit in path.circuits:
                out[circuit] = out.get(circuit, 0) + path.bytes
        return out

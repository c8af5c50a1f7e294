"""The data plane of a site's agent: its storage, its data endpoint, its scans and the
transfers it receives, serves and relays.

Everything here runs in threads of its own; the sync only collects a :class:`DataReport`
(:meth:`SiteData.report`) and hands over the server's :class:`DataOrders`
(:meth:`SiteData.apply`), so a scan of a terabyte or a transfer of days never delays a
heartbeat.  Orders are level-triggered like attempts: a scan or transfer the server no
longer lists is stopped and forgotten; what it verified stays on disk.
"""

from __future__ import annotations

import hmac
import logging
import threading
from pathlib import Path
from typing import Any

import zstandard

from onecluster.agent._deid import deidentify_version
from onecluster.agent._receive import Receive
from onecluster.dataplane import DataPlaneMetrics, DataServer, Pacer, Served, window_bytes
from onecluster.errors import PlatformError
from onecluster.schema import (
    DataOrders,
    DataReport,
    ReplicaReport,
    ScanOrder,
    ScanReport,
    ServeOrder,
)
from onecluster.storage import DataStore, ScanProgress, SourceReader, scan_tree
from onecluster.transfer import encode_manifest

__all__ = ["SiteData"]

_log = logging.getLogger("onecluster.agent")


class _Scan:
    """One scan, in a thread: progress, then the version found (or the error).  An export's
    scan first writes the de-identified copy under ``exports`` and scans that."""

    def __init__(
        self, order: ScanOrder, store: DataStore, *, exports: Path, deid_key: bytes | None
    ) -> None:
        self.order = order
        self._store = store
        self._exports = exports
        self._deid_key = deid_key
        self._deid: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._progress = ScanProgress(0, 0, 0, 0)
        self.report = ScanReport(id=order.id, state="scanning")
        self._thread = threading.Thread(target=self._run, name=f"scan-{order.id}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        path = Path(self.order.path)
        try:
            if self.order.export is not None:
                path = self._exports / self.order.export
                self._deid = deidentify_version(
                    self.order, self._store, self._deid_key, path, self._stop
                )
            manifest = scan_tree(path, progress=self._note, stop=self._stop)
            self._store.register(self.order.dataset, path, manifest)
        except PlatformError as exc:
            if not self._stop.is_set():
                _log.error("scan of %s as %s failed: %s", path, self.order.dataset, exc.message)
                self.report = self._with(state="failed", error=exc.message)
            return
        _log.info(
            "scanned %s as %s: version %s, %d files, %d bytes",
            path,
            self.order.dataset,
            manifest.root_hex[:16],
            manifest.files,
            manifest.bytes_total,
        )
        self.report = self._with(
            state="done",
            root=manifest.root_hex,
            files=manifest.files,
            chunks=len(manifest.chunks),
            path=str(path) if self.order.export is not None else None,
            deid=self._deid,
        )

    def _note(self, progress: ScanProgress) -> None:
        self._progress = progress
        self.report = self._with(state="scanning")

    def _with(self, **fields: object) -> ScanReport:
        p = self._progress
        return ScanReport.model_validate(
            {
                "id": self.order.id,
                "files_done": p.files_done,
                "bytes_done": p.bytes_done,
                "files_total": p.files_total,
                "bytes_total": p.bytes_total,
                **fields,
            }
        )

    def stop(self) -> None:
        self._stop.set()


class SiteData:
    """The data plane of ``site``: storage under ``data_dir``, an endpoint on ``port`` (0:
    any free one), announced at ``address`` (``None``: the site's service address).  Its
    endpoint and fetches count into :attr:`metrics` (the agent's ``--metrics`` exports it)."""

    def __init__(
        self,
        site: str,
        data_dir: Path,
        *,
        port: int = 0,
        address: str | None = None,
        deid_key: bytes | None = None,
    ) -> None:
        self._site = site
        self._exports = data_dir / "exports"
        self._deid_key = deid_key
        self.store = DataStore(data_dir, site=site)
        self._address = address
        self._lock = threading.Lock()
        self._scans: dict[str, _Scan] = {}
        self._receives: dict[str, Receive] = {}
        self._serve: dict[str, ServeOrder] = {}
        self._readers: dict[str, tuple[SourceReader, bytes]] = {}
        self._pacers: dict[tuple[str, str], Pacer] = {}
        self._moved: dict[str, int] = {}  # bytes per circuit of transfers that ended here
        self._window = window_bytes()
        self.metrics = DataPlaneMetrics()
        try:
            self.server = DataServer(self, port=port, metrics=self.metrics)
        except OSError as exc:
            self.store.close()
            msg = f"the data endpoint cannot listen on port {port}: {exc.strerror or exc}"
            raise PlatformError(msg, hint="pass another --data-port") from exc
        _log.info("data endpoint of %s on port %d, storage in %s", site, self.server.port, data_dir)

    def close(self) -> None:
        """Stop every scan and transfer (what was verified stays) and the endpoint."""
        with self._lock:
            scans, receives = list(self._scans.values()), list(self._receives.values())
        for scan in scans:
            scan.stop()
        for receive in receives:
            receive.stop()
        self.server.close()
        with self._lock:
            for reader, _ in self._readers.values():
                reader.close()
        self.store.close()

    # -- the sync ---------------------------------------------------------------------------

    def report(self) -> DataReport:
        """The data part of the next sync."""
        with self._lock:
            scans = [s.report for s in self._scans.values()]
            receives = list(self._receives.values())
            moved = dict(self._moved)
        for receive in receives:
            for circuit, n in receive.circuit_bytes().items():
                moved[circuit] = moved.get(circuit, 0) + n
        replicas = [
            ReplicaReport(
                dataset=r.dataset,
                root=r.root.hex(),
                state="complete" if r.complete else "partial",
                bytes_present=r.bytes_present,
                path=str(r.dir),
            )
            for r in self.store.replicas()
        ]
        return DataReport(
            port=self.server.port,
            address=self._address,
            scans=scans,
            transfers=[r.report() for r in receives],
            replicas=replicas,
            circuit_bytes=moved,
        )

    def apply(self, orders: DataOrders) -> None:
        """Start what is new, follow what changed, stop what is no longer listed."""
        with self._lock:
            for order in orders.scans:
                if order.id not in self._scans:
                    _log.info("scanning %s as dataset %s", order.path, order.dataset)
                    self._scans[order.id] = _Scan(
                        order, self.store, exports=self._exports, deid_key=self._deid_key
                    )
            listed = {o.id for o in orders.scans}
            for scan_id in set(self._scans) - listed:
                self._scans.pop(scan_id).stop()
            for receive_order in orders.receive:
                current = self._receives.get(receive_order.id)
                if current is None:
                    _log.info(
                        "receiving %s version %s from %s over %s",
                        receive_order.dataset,
                        receive_order.root[:16],
                        receive_order.src,
                        ", ".join(p.name for p in receive_order.paths) or "no path yet",
                    )
                    current = Receive(
                        receive_order,
                        self.store,
                        window_bytes=self._window,
                        site=self._site,
                        metrics=self.metrics,
                    )
                    self._receives[receive_order.id] = current
                    current.start()
                else:
                    current.update(receive_order)
            wanted = {o.id for o in orders.receive}
            gone = [self._receives.pop(t) for t in set(self._receives) - wanted]
            for receive in gone:
                for circuit, n in receive.circuit_bytes().items():
                    self._moved[circuit] = self._moved.get(circuit, 0) + n
            self._serve = {o.id: o for o in orders.serve}
            for transfer in set(self._readers) - set(self._serve):
                self._readers.pop(transfer)[0].close()
            for pacer_key in [k for k in self._pacers if k[0] not in self._serve]:
                del self._pacers[pacer_key]
            for (transfer, path), pacer in self._pacers.items():
                pacer.set_rate(self._serve[transfer].rates.get(path))
        for receive in gone:
            receive.stop()

    # -- the data endpoint's grants ---------------------------------------------------------

    def served(self, transfer: str, ticket: str) -> Served | None:
        """What the holder of ``ticket`` may do with ``transfer`` here (``None``: nothing).

        Raises :class:`PlatformError` when this site should serve it but cannot (it no
        longer holds the version): the message reaches the receiver."""
        with self._lock:
            order = self._serve.get(transfer)
        if order is None or not hmac.compare_digest(order.ticket.encode(), ticket.encode()):
            return None
        if order.relay:
            return Served(relay=True)
        reader, manifest = self._reader(order)
        return Served(
            relay=False, manifest=manifest, source=reader, pacer=lambda p: self._pacer(order, p)
        )

    def _reader(self, order: ServeOrder) -> tuple[SourceReader, bytes]:
        with self._lock:
            cached = self._readers.get(order.id)
        if cached is not None:
            return cached
        root = bytes.fromhex(order.root)
        reader = self.store.reader(order.dataset, root)
        manifest = self.store.manifest(root)
        assert manifest is not None  # reader() found it
        packed = zstandard.ZstdCompressor(level=3).compress(encode_manifest(manifest))
        with self._lock:
            return self._readers.setdefault(order.id, (reader, packed))

    def _pacer(self, order: ServeOrder, path: str) -> Pacer:
        with self._lock:
            key = (order.id, path)
            if key not in self._pacers:
                self._pacers[key] = Pacer(order.rates.get(path))
            return self._pacers[key]

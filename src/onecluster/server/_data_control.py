"""The control plane's data half: datasets, scans, pushes and transfers for the routes, the
data part of every agent sync, and what the scheduler learns of both.

Which chunks a site holds stays between the agents; the server keeps versions, replicas,
scans and transfers, plans the paths every transfer takes, and measures how busy the data
plane keeps each circuit (:class:`CircuitRates`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from onecluster.clock import Clock
from onecluster.errors import ForbiddenError, NotFoundError, ValidationError
from onecluster.export import is_export
from onecluster.model import Fabric
from onecluster.schema import (
    AgentSync,
    DataOrders,
    DatasetAdd,
    DatasetOut,
    PushIn,
    ScanOut,
    TransferOut,
)
from onecluster.server._circuit_rates import CircuitRates
from onecluster.server._data_orders import Planner, data_orders, rank_sources
from onecluster.server._data_views import data_sync, dataset_out, scan_out, transfer_out
from onecluster.server._links import LinkBoard
from onecluster.server._views import require_site
from onecluster.store import DataEndpoint, DatasetLocality, Store, TransferRecord
from onecluster.transfer import Etiquette, Hop

__all__ = ["Catalog", "DataControl", "Refusal"]

#: Records a refused export and gives the error to raise.
Refusal = Callable[[Mapping[str, object], str], ForbiddenError]


def _unrecorded(facts: Mapping[str, object], reason: str) -> ForbiddenError:
    return ForbiddenError(reason)


_log = logging.getLogger("onecluster.data")


@dataclass(frozen=True, slots=True)
class Catalog:
    """The datasets registered (with or without a version yet), and the latest version of
    each that has one."""

    names: frozenset[str] = frozenset()
    latest: Mapping[str, DatasetLocality] = field(default_factory=lambda: MappingProxyType({}))


class DataControl:
    """Datasets and transfers; methods are synchronous and thread-safe and raise
    :mod:`onecluster.errors` classes, like :class:`ControlPlane`'s."""

    def __init__(
        self,
        fabric: Fabric,
        store: Store,
        clock: Clock,
        links: LinkBoard,
        *,
        etiquette: Etiquette,
        stale_s: float,
    ) -> None:
        self.fabric = fabric
        self.store = store
        self.clock = clock
        self.links = links
        self.etiquette = etiquette
        self.rates = CircuitRates(fabric, stale_s=stale_s)
        self._catalog = Catalog()
        self._complaints: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        #: Writes a refused export to the register and gives the error to raise (set by
        #: :class:`~onecluster.server._exports.ExportControl`; without it, a transfer that
        #: would be an export is refused unrecorded).
        self.refuse: Refusal = _unrecorded

    # -- datasets and scans ---------------------------------------------------------------

    def add(self, body: DatasetAdd) -> ScanOut:
        """Register ``body.name`` (if new) and queue a scan of its directory at its site."""
        require_site(self.fabric, body.site)
        scan = self.store.add_scan(body.name, body.site, body.path, now=self.clock.now())
        self.reload()
        return scan_out(scan)

    def scan(self, scan_id: str) -> ScanOut:
        """One scan (:class:`NotFoundError` for an unknown id)."""
        return scan_out(self.store.scan(scan_id))

    def datasets(self) -> list[DatasetOut]:
        """Every registered dataset, and every one the fabric declares, by name."""
        registered = {d.name: d for d in self.store.datasets()}
        names = sorted(registered.keys() | {d.name for d in self.fabric.datasets})
        return [dataset_out(self.fabric, n, registered.get(n)) for n in names]

    def dataset(self, name: str) -> DatasetOut:
        """One dataset, registered or declared; :class:`NotFoundError` naming the known ones."""
        record = self.store.dataset(name)
        if record is None and self.fabric.dataset(name) is None:
            raise self._unknown(name)
        return dataset_out(self.fabric, name, record)

    # -- transfers ------------------------------------------------------------------------

    def push(self, body: PushIn, requester: str = "") -> tuple[TransferOut, bool]:
        """Send a version to a site; the transfer and whether it is a new one.

        :class:`NotFoundError` for an unknown dataset, site or version;
        :class:`ValidationError` for a push from a site to itself; :class:`ConflictError`
        when there is nothing to send from (see :meth:`DataStore.push`);
        :class:`ForbiddenError` (written to the register) when every source would take it
        out of a jurisdiction that controls exports (that is an export: ``POST /exports``).
        """
        if (
            self.fabric.dataset(body.dataset) is None
            and body.dataset not in self.store.dataset_names()
        ):
            raise self._unknown(body.dataset)
        require_site(self.fabric, body.to)
        if body.from_site is not None:
            require_site(self.fabric, body.from_site)
            if body.from_site == body.to:
                msg = f"a push from {body.to} to {body.to} moves nothing"
                raise ValidationError(msg, hint="leave --from out, or name another site")
        src = self._gate(
            body.dataset,
            body.version,
            body.to,
            body.from_site,
            {"via": "push", "requester": requester},
        )
        result = self.store.push(
            body.dataset,
            body.to,
            now=self.clock.now(),
            rank=self._ranking(body.to),
            src=src,
            root=body.version,
        )
        return self._out([result.transfer])[0], result.created

    def prefetch(self, dataset: str, root: str, site: str, job_id: str) -> TransferRecord:
        """The transfer bringing version ``root`` of ``dataset`` to ``site`` for ``job_id``:
        one already on its way there, a new one from the best source, or one already done
        (:class:`ConflictError` when no site holds all of it; :class:`ForbiddenError` when
        every site that does would export it)."""
        src = self._gate(dataset, root, site, None, {"via": "prefetch", "job": job_id})
        result = self.store.push(
            dataset,
            site,
            now=self.clock.now(),
            rank=self._ranking(site),
            src=src,
            root=root,
            job_id=job_id,
        )
        return result.transfer

    def send(self, dataset: str, root: str, src: str, dst: str) -> TransferRecord:
        """The transfer of an approved export, whose register entry is written (no gate)."""
        result = self.store.push(
            dataset, dst, now=self.clock.now(), rank=self._ranking(dst), src=src, root=root
        )
        return result.transfer

    def rank(self, dst: str, candidates: Sequence[str]) -> Sequence[str]:
        """``candidates`` from the best source for ``dst`` to the worst."""
        return self._ranking(dst)(sorted(candidates))

    def _gate(
        self,
        dataset: str,
        root: str | None,
        dst: str,
        src: str | None,
        facts: Mapping[str, object],
    ) -> str | None:
        """The source of a push or prefetch that is no export (``None``: let the store pick
        and explain); raises the refusal when every source would be an export."""
        record = self.store.dataset(dataset)
        versions = record.versions if record is not None else ()
        version = next((v for v in versions if root is None or v.root == root), None)
        if version is None:
            return src  # the store says what is missing
        complete = sorted(version.complete_at)
        if dst in complete:
            return src
        candidates = complete if src is None else [s for s in complete if s == src]
        allowed = [s for s in candidates if not is_export(self.fabric, s, dst)]
        if candidates and not allowed:
            where = candidates[0] if len(candidates) == 1 else ", ".join(candidates)
            home = self.fabric.site(candidates[0]).jurisdiction
            abroad = self.fabric.site(dst).jurisdiction
            reason = (
                f"sending {dataset} from {where} ({home}) to {dst} ({abroad}) takes it out of "
                f"{home}, which controls exports: only an approved export may (onecluster "
                f"export request, then onecluster export start {dataset} --to {dst} "
                "--approval ID)"
            )
            entry = {
                **facts,
                "dataset": dataset,
                "version": version.root,
                "source": candidates[0],
                "destination": dst,
            }
            raise self.refuse(entry, reason)
        if src is not None or not allowed:
            return src
        return self.rank(dst, allowed)[0]

    def _ranking(self, dst: str) -> Callable[[Sequence[str]], Sequence[str]]:
        """Sources for ``dst`` from best to worst, as the circuits and sites are now."""
        down_circuits = self.links.down_circuits()
        up = {e.site for e in self.store.data_endpoints()}
        down_sites = frozenset(self.fabric.site_names) - up

        def rank(candidates: Sequence[str]) -> Sequence[str]:
            return rank_sources(
                self.fabric, dst, candidates, down_circuits=down_circuits, down_sites=down_sites
            )

        return rank

    def transfers(self, *, active_only: bool = True, limit: int = 100) -> list[TransferOut]:
        """Transfers newest first (those not ended, or every one)."""
        return self._out(self.store.transfers(active_only=active_only, limit=limit))

    def transfer(self, transfer_id: str) -> TransferOut:
        """One transfer (:class:`NotFoundError` for an unknown id)."""
        return self._out([self.store.transfer(transfer_id)])[0]

    def cancel(self, transfer_id: str) -> TransferOut:
        """Cancel a transfer (:class:`ConflictError` if it already ended)."""
        return self._out([self.store.cancel_transfer(transfer_id, now=self.clock.now())])[0]

    # -- the sync -------------------------------------------------------------------------

    def take_report(self, site: str, body: AgentSync, *, received: float) -> DataOrders:
        """Take a sync's data part, in a transaction of its own, and answer with the site's
        data orders.  Never raises: a report that cannot be taken is logged (once per site
        and reason) and the orders are read without it; when even that fails the site gets
        no orders this time (its transfers stop, and resume from what they verified with the
        next sync that has orders).
        """
        if body.data is not None:
            self.rates.observe(site, body.data.circuit_bytes, received)
        try:
            work = self.store.record_data(site, data_sync(body), now=self.clock.now())
        except Exception as exc:  # noqa: BLE001 -- a bad data report must not fail the sync
            self._complain(site, "its data report could not be taken", exc)
            try:
                work = self.store.data_work(site)
            except Exception as again:  # noqa: BLE001 -- nor a database that hiccups
                self._complain(site, "its data orders could not be read", again)
                return DataOrders()
        if body.data is not None and any(s.state == "done" for s in body.data.scans):
            try:
                self.reload()  # a job may name the new version's dataset at once
            except Exception as exc:  # noqa: BLE001 -- the reconcile loop reloads it too
                self._complain(site, "the datasets could not be read again", exc)
        return data_orders(site, work, self._planner(work.endpoints))

    def _complain(self, site: str, what: str, exc: Exception) -> None:
        reason = f"{type(exc).__name__}: {exc}"
        with self._lock:
            first = (site, reason) not in self._complaints
            self._complaints.add((site, reason))
        if first:
            _log.warning(
                "site %s: %s (%s); its jobs and lease are not affected", site, what, reason
            )

    # -- what the scheduler sees ----------------------------------------------------------

    def catalog(self, name: str | None = None) -> Catalog:
        """The registered datasets; read again from the store first when ``name`` is
        neither among them nor declared in the fabric (it may have been registered since)."""
        if name is not None and not self.knows(name):
            return self.reload()
        return self._catalog

    def knows(self, name: str | None) -> bool:
        """Whether ``name`` is known without asking the store (no name is known too)."""
        return name is None or self.fabric.dataset(name) is not None or name in self._catalog.names

    def reload(self) -> Catalog:
        """Read the registered datasets again."""
        latest = {d.name: d for d in self.store.dataset_locality()}
        names = self.store.dataset_names() | latest.keys()
        self._catalog = catalog = Catalog(names=names, latest=MappingProxyType(latest))
        return catalog

    def replicas(self) -> dict[str, frozenset[str]]:
        """For the scheduler: dataset → the sites holding all of its latest version, for the
        registered ones (read again now)."""
        return {name: d.sites for name, d in self.reload().latest.items() if d.sites}

    # -- plumbing -------------------------------------------------------------------------

    def _planner(self, endpoints: Sequence[DataEndpoint]) -> Planner:
        return Planner(
            self.fabric,
            down=self.links.down_circuits(),
            ends=self.links.end_addresses(),
            data={e.site: Hop(e.address, e.port) for e in endpoints},
            etiquette=self.etiquette,
        )

    def _out(self, transfers: Sequence[TransferRecord]) -> list[TransferOut]:
        now = self.clock.now()
        planner = (
            self._planner(self.store.data_endpoints()) if any(t.active for t in transfers) else None
        )
        return [
            transfer_out(
                self.fabric,
                t,
                planner.paths(t) if planner is not None and t.active else [],
                now=now,
            )
            for t in transfers
        ]

    def _unknown(self, name: str) -> NotFoundError:
        known = sorted(self.reload().names | {d.name for d in self.fabric.datasets})
        msg = f"there is no dataset {name!r}"
        return NotFoundError(
            msg,
            hint=f"known datasets: {', '.join(known) or 'none'}; register one with "
            "`onecluster dataset add NAME --site SITE --path DIR`",
        )

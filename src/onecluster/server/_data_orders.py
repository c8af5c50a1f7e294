"""What each site's data plane is told to do, and where a push is sent from (pure).

**Orders.**  A site is told to run its queued scans; to *receive* every active transfer whose
destination it is, over the paths :func:`onecluster.transfer.plan_paths` plans now (the
circuits that are down left out, every circuit's ends as their agents announced them, every
site's data endpoint); and to *serve* every active transfer whose source it is, and to relay
those whose paths pass through it.  A serve order caps each path it carries at the rate the
etiquette gives it (``rates``; a path with no cap is left out of it).  The orders are
level-triggered: a transfer no longer listed is stopped.

**Sources.**  Without ``--from``, a push is sent from the site holding all of the version
that has the most direct circuit capacity to the destination that is up; sites that are down
go last, and ties go by name.  Relayed paths still help a source with no direct circuit left.

**Jurisdictions.**  A transfer from a site that controls exports never relays through a site
outside its jurisdiction (:func:`onecluster.export.relay_allowed`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from onecluster.export import relay_allowed
from onecluster.model import Fabric
from onecluster.schema import DataOrders, HopOut, PathOut, ReceiveOrder, ScanOrder, ServeOrder
from onecluster.store import DataWork, PathSample, TransferRecord
from onecluster.transfer import Etiquette, Hop, PathPlan, plan_paths

__all__ = ["Planner", "data_orders", "path_out", "rank_sources"]


class Planner:
    """Plans the paths of transfers for one moment: the fabric, the circuits down, the
    circuits' end addresses, the sites' data endpoints and the etiquette."""

    def __init__(
        self,
        fabric: Fabric,
        *,
        down: frozenset[str],
        ends: Mapping[tuple[str, str], str],
        data: Mapping[str, Hop],
        etiquette: Etiquette,
    ) -> None:
        self.fabric = fabric
        self._down = down
        self._ends = ends
        self._data = data
        self._etiquette = etiquette

    def paths(self, transfer: TransferRecord) -> list[PathPlan]:
        """The paths ``transfer`` uses now (none when its source cannot be reached)."""
        if transfer.src == transfer.dst:
            return []
        plans = plan_paths(
            self.fabric,
            transfer.src,
            transfer.dst,
            down=self._down,
            ends=self._ends,
            data=self._data,
            etiquette=self._etiquette,
        )
        return [
            p for p in plans if p.relay is None or relay_allowed(self.fabric, transfer.src, p.relay)
        ]


def data_orders(site: str, work: DataWork, planner: Planner) -> DataOrders:
    """The data orders of ``site``: its scans, the transfers it receives, serves or relays."""
    receive: list[ReceiveOrder] = []
    serve: list[ServeOrder] = []
    for transfer in work.transfers:
        plans = planner.paths(transfer)
        if transfer.dst == site:
            receive.append(
                ReceiveOrder(
                    id=transfer.id,
                    dataset=transfer.dataset,
                    root=transfer.root,
                    src=transfer.src,
                    ticket=transfer.ticket,
                    paths=[path_out(p, transfer.paths) for p in plans],
                    priority="prefetch" if transfer.reason == "prefetch" else "bulk",
                )
            )
        if transfer.src == site:
            serve.append(_serve(transfer, plans, relay=False))
        relayed = [p for p in plans if p.relay == site]
        if relayed:
            serve.append(_serve(transfer, relayed, relay=True))
    return DataOrders(
        scans=[
            ScanOrder(
                id=s.id,
                dataset=s.dataset,
                path=s.path,
                export=s.export_id,
                source_dataset=s.source_dataset,
                source_root=s.source_root,
                profile=s.profile,
            )
            for s in work.scans
        ],
        receive=receive,
        serve=serve,
    )


def _serve(transfer: TransferRecord, carried: Sequence[PathPlan], *, relay: bool) -> ServeOrder:
    return ServeOrder(
        id=transfer.id,
        dataset=transfer.dataset,
        root=transfer.root,
        ticket=transfer.ticket,
        relay=relay,
        rates={p.name: p.rate_bps for p in carried if p.rate_bps is not None},
    )


def path_out(plan: PathPlan, samples: Sequence[PathSample] = ()) -> PathOut:
    """A planned path on the wire, with what the destination last reported of it."""
    said = next((s for s in samples if s.name == plan.name), None)
    return PathOut(
        name=plan.name,
        circuits=list(plan.circuits),
        relay=plan.relay,
        rtt_s=plan.rtt_s,
        rate_bps=plan.rate_bps,
        hops=[HopOut(address=h.address, port=h.port) for h in plan.hops],
        bytes=said.bytes if said is not None else 0,
        streams=said.streams if said is not None else 0,
        state=said.state if said is not None else "planned",
    )


def rank_sources(
    fabric: Fabric,
    dst: str,
    candidates: Sequence[str],
    *,
    down_circuits: Collection[str],
    down_sites: Collection[str],
) -> list[str]:
    """``candidates`` from the best source for ``dst`` to the worst (see the module's
    docstring); every candidate is in the answer."""

    def key(site: str) -> tuple[bool, float, str]:
        direct = sum(
            c.total_gbps for c in fabric.circuits_between(site, dst) if c.name not in down_circuits
        )
        return (site in down_sites, -direct, site)

    return sorted(candidates, key=key)

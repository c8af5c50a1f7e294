"""The fabric in force on this replica, as the database holds it: adopted at start, read again
when its epoch moves, changed by applies and drains (``docs/fabric.md``, "Changing the fabric
while it runs").

:class:`FabricInForce` speaks to the store and parses versions; the
:class:`~onecluster.server.ControlPlane` swaps its components when :meth:`FabricInForce.newer`
says the database moved on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from onecluster.clock import Clock
from onecluster.errors import ConflictError, FabricError, NotFoundError
from onecluster.fabric import (
    FabricDiff,
    Workload,
    dump_fabric,
    fabric_diff,
    parse_fabric,
    refusal,
    stranded,
)
from onecluster.model import Fabric
from onecluster.schema import DrainOut, FabricApply, FabricApplyOut, FabricOut
from onecluster.server._fabric_views import apply_out, drain_out, fabric_out, new_version
from onecluster.store import DrainRecord, FabricRecord, NewFabric, Store

__all__ = ["FabricInForce", "FabricState"]

_log = logging.getLogger("onecluster.server")


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricState:
    """What is in force: the fabric, its version, the drains, and the epoch they reflect."""

    fabric: Fabric
    version: int
    drains: tuple[DrainRecord, ...]
    epoch: int


class FabricInForce:
    """The fabric in force and its drains, read from and changed in the database.

    :attr:`state` is what this replica has taken (:meth:`took`); methods are thread-safe as
    far as the store is (every change is one transaction), and raise
    :mod:`onecluster.errors` classes.
    """

    def __init__(self, store: Store, clock: Clock, mine: Fabric) -> None:
        """Take the database's fabric; a database without one takes ``mine`` (the
        ``--fabric`` file) as version 1.  Where the database's differs from ``mine``, the
        database's is in force and a warning says how they differ and what to run."""
        self._store = store
        self._clock = clock
        text = dump_fabric(mine, comment="version 1: the --fabric file of the first server")
        adopted = store.adopt_fabric(
            text, name=mine.name, by="onecluster server --fabric", now=clock.now()
        )
        _warn_if_differs(adopted, mine)
        # The epoch first, then what it covers: a change in between shows as a newer epoch.
        epoch = store.fabric_epoch()
        record = store.fabric()
        assert record is not None  # adopted above
        self.state = FabricState(
            fabric=_parsed(record),
            version=record.version,
            drains=tuple(store.drains()),
            epoch=epoch.epoch,
        )

    def newer(self) -> FabricState | None:
        """What is in force in the database, if it moved since :attr:`state` (one row read
        when it did not).  A version this server cannot read is logged and left out (the
        drains are still taken)."""
        seen = self._store.fabric_epoch()
        current = self.state
        if seen.epoch == current.epoch:
            return None
        fabric, version = current.fabric, current.version
        if seen.version != current.version:
            record = self._store.fabric()
            if record is not None and record.version != current.version:
                try:
                    fabric, version = _parsed(record), record.version
                except FabricError as exc:
                    _log.error("cannot take fabric version %d: %s", record.version, exc.message)
        drains = tuple(self._store.drains())
        return FabricState(fabric=fabric, version=version, drains=drains, epoch=seen.epoch)

    def took(self, state: FabricState) -> None:
        """``state`` is in force here now."""
        self.state = state

    def show(self) -> FabricOut:
        """The fabric in force (as the database holds it) and the drains."""
        record = self._store.fabric()
        if record is None:  # only before the first server stored its file
            msg = "no fabric is in force yet"
            raise NotFoundError(msg, hint="start `onecluster server --fabric FILE` first")
        return fabric_out(record, self._store.drains())

    def apply(self, body: FabricApply, *, by: str) -> FabricApplyOut:
        """Check ``body.yaml`` and say what it changes; unless a dry run, store it as the
        next version with an event per change (the caller then swaps).

        :class:`FabricError` for a file that is not a valid fabric; :class:`ConflictError`
        for a change that would strand work (naming it; nothing changes) or when
        ``base_version`` is no longer in force.  A fabric equal to the one in force changes
        nothing (``applied`` false, no new version).
        """
        new = _sent(body.yaml)
        if body.dry_run:
            current = self._current()
            _check_base(body.base_version, current)
            old = self._fabric_of(current)
            diff = fabric_diff(old, new)
            found = stranded(old, new, self._store.fabric_workload()) if diff else ()
            return apply_out(
                base=current.version,
                version=current.version,
                applied=False,
                dry_run=True,
                diff=diff,
                strands=found,
            )
        judged: list[tuple[int, FabricDiff]] = []  # the last try's (a retry judges again)

        def decide(current: FabricRecord, work: Workload) -> NewFabric | None:
            _check_base(body.base_version, current)
            old = self._fabric_of(current)
            diff = fabric_diff(old, new)
            judged.append((current.version, diff))
            if not diff:
                return None
            found = stranded(old, new, work)
            if found:
                raise refusal(found)
            return new_version(body.yaml, new, diff, version=current.version + 1, by=by)

        record, applied = self._store.apply_fabric(decide, now=self._clock.now())
        base, diff = judged[-1]
        return apply_out(
            base=base, version=record.version, applied=applied, dry_run=False, diff=diff
        )

    def drain(self, site: str, gpu_type: str | None, *, by: str, reason: str | None) -> DrainOut:
        """Drain ``site`` (``gpu_type`` None) or one of its pools (the caller checked that
        they exist); draining what is drained already changes nothing."""
        now = self._clock.now()
        record, _ = self._store.drain(site, gpu_type, by=by, now=now, reason=reason)
        return drain_out(record)

    def undrain(self, site: str, gpu_type: str | None, *, by: str) -> list[DrainOut]:
        """Lift one pool's drain, or every drain at ``site``; the drains lifted."""
        lifted = self._store.undrain(site, gpu_type, by=by, now=self._clock.now())
        return [drain_out(d) for d in lifted]

    def _current(self) -> FabricRecord:
        record = self._store.fabric()
        if record is None:
            msg = "no fabric is in force yet"
            raise ConflictError(msg, hint="start `onecluster server --fabric FILE` first")
        return record

    def _fabric_of(self, record: FabricRecord) -> Fabric:
        """The fabric of ``record``: the one in force here when it is that version."""
        state = self.state
        return state.fabric if record.version == state.version else _parsed(record)


def _warn_if_differs(record: FabricRecord, mine: Fabric) -> None:
    differs = fabric_diff(_parsed(record), mine)
    if not differs:
        return
    shown = "; ".join(c.describe() for c in differs.changes[:3])
    more = len(differs) - 3
    _log.warning(
        "the database's fabric (version %d, applied by %s) is in force, not the --fabric "
        "file, which differs from it: %s%s; to put the file in force run `onecluster fabric "
        "apply FILE`",
        record.version,
        record.applied_by,
        shown,
        f" and {more} more" if more > 0 else "",
    )


def _parsed(record: FabricRecord) -> Fabric:
    """The fabric of a stored version (:class:`FabricError` if this server cannot read it)."""
    return parse_fabric(record.text, source=f"fabric version {record.version}")


def _sent(text: str) -> Fabric:
    """The fabric a request sent (:class:`FabricError` for one that is not valid)."""
    try:
        return parse_fabric(text, source="the fabric sent")
    except RecursionError:  # YAML nested thousands deep: no fabric is
        msg = "the fabric sent is nested too deeply to be a fabric file"
        raise FabricError(msg, hint="see docs/fabric.md for the format") from None


def _check_base(base: int | None, current: FabricRecord) -> None:
    """:class:`ConflictError` unless ``base`` (if given) is the version in force."""
    if base is not None and base != current.version:
        msg = (
            f"fabric version {current.version} is in force now, not version {base} "
            f"(applied by {current.applied_by})"
        )
        raise ConflictError(msg, hint="look at the diff again and apply once more")

"""The control plane the routes and the reconcile loop share: store, scheduler, auth, clock.

The fabric in force lives in the database (``docs/fabric.md``, "Changing the fabric while
it runs"): at start the control plane takes the database's (or, on a database without one,
stores its ``--fabric`` file as version 1), and :meth:`ControlPlane.refresh_fabric` swaps in
a newer version or new drains wherever another replica (or this one) applied them.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import replace

from onecluster.clock import Clock
from onecluster.errors import NotFoundError, PlatformError, ValidationError
from onecluster.fabric import fabric_diff
from onecluster.model import Fabric, JobRecord, JobSpec
from onecluster.reports import Month, gpu_report, usage_record
from onecluster.scheduler import PendingJob, Scheduler
from onecluster.schema import (
    AgentSync,
    AgentSyncReply,
    DrainOut,
    FabricApply,
    FabricApplyOut,
    FabricOut,
    JobSubmit,
    SiteOut,
    StatsOut,
    TeamOut,
    TokenCreate,
    TokenOut,
)
from onecluster.server._auth import Authenticator, bootstrap_admin_token, hash_token, new_secret
from onecluster.server._before_after import before_after
from onecluster.server._circuit_rates import CircuitRates
from onecluster.server._config import ServerConfig
from onecluster.server._data_control import DataControl
from onecluster.server._exports import ExportControl
from onecluster.server._fabric_in_force import FabricInForce
from onecluster.server._fabric_views import closed_pools, mark_draining
from onecluster.server._links import LinkBoard
from onecluster.server._pending import PendingMirror
from onecluster.server._usage import TeamUsage
from onecluster.server._views import (
    desired_attempt,
    require_site,
    sites_out,
    stats_out,
    sync_report,
    teams_out,
)
from onecluster.state_dir import REGISTER_DIR
from onecluster.store import Store
from onecluster.topology import LinkCarry

__all__ = ["ControlPlane"]

_log = logging.getLogger("onecluster.server")
#: The leader keeps its links again this often even when they did not change, so that their
#: age in the database says how long ago a leader last vouched for them.
_RESTAMP_S = 10.0
#: A carry older than this is taken for its flap damping only (the circuits may have changed).
_CARRY_MAX_AGE_S = 60.0
_links_log = logging.getLogger("onecluster.links")


class ControlPlane:
    """Everything a request or a reconcile pass needs, opened once at server start.

    Methods are synchronous and thread-safe (FastAPI runs them in its thread pool); they
    raise :mod:`onecluster.errors` classes, which the app maps to HTTP statuses.
    """

    def __init__(self, config: ServerConfig, store: Store, clock: Clock) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        #: Held while the fabric in force is swapped (:meth:`refresh_fabric`); a caller that
        #: reads :attr:`fabric` and :attr:`scheduler` together holds it to see one version.
        self.fabric_lock = threading.RLock()
        self._stale_s = max(5.0, 3 * config.heartbeat_interval_s)
        # The scheduler weighs preempting against the grace the agents really give.
        self._policy = replace(config.policy, grace_s=config.grace_s)
        #: The fabric in force as the database holds it (this replica's :attr:`fabric` and
        #: scheduler follow it: :meth:`refresh_fabric`).
        self.in_force = FabricInForce(store, clock, config.fabric)
        state = self.in_force.state
        self.fabric: Fabric = state.fabric
        self.scheduler = Scheduler(
            self.fabric, self._policy, drained=closed_pools(self.fabric, state.drains)
        )
        self.usage = TeamUsage(store, config.policy.fair_share.half_life_s)
        self.auth = Authenticator(store)
        self.links = LinkBoard(
            self.fabric,
            stale_s=self._stale_s,
            lag_s=max(3.0, 3 * config.heartbeat_interval_s),
        )
        self.data = DataControl(
            self.fabric,
            store,
            clock,
            self.links,
            etiquette=config.etiquette,
            stale_s=self._stale_s,
        )
        self.exports = ExportControl(
            self.fabric,
            store,
            clock,
            self.data,
            config.state_dir / REGISTER_DIR,
            register_key=config.register_key,
        )
        self._alerts_lock = threading.Lock()
        self._kept_shape: LinkCarry | None = None  # of the carry last kept in the database
        self._kept_at = 0.0  # when it was kept (this server's clock)
        self._refusals_logged: set[tuple[str, str]] = set()
        self.pending = PendingMirror(
            lambda: (
                PendingJob(job_id=j.id, spec=j.spec(), submitted_at=j.submitted_at)
                for j in store.pending_jobs()
            ),
            lambda: store.pending_epoch,
        )

    @classmethod
    def open(cls, config: ServerConfig, clock: Clock) -> ControlPlane:
        """Open (create and migrate) the database and mint the first admin token if needed."""
        config.state_dir.mkdir(parents=True, exist_ok=True)
        store = Store.open(config.database_url)
        bootstrap_admin_token(store, config.state_dir, clock.now())
        _log.info("state in %s, database %s", config.state_dir, store.engine.url.render_as_string())
        return cls(config, store, clock)

    def close(self) -> None:
        """Close the export register and release the database connections."""
        self.exports.close()
        self.store.close()

    # -- the fabric in force --------------------------------------------------------------

    @property
    def fabric_version(self) -> int:
        """The version of :attr:`fabric`."""
        return self.in_force.state.version

    def refresh_fabric(self) -> bool:
        """Swap in the fabric in force and the drains if either changed in the database
        (another replica, or this one, applied or drained); whether anything changed.

        Cheap when nothing did: one row read (``fabric_epoch``).  Call it often — every
        replica, every reconcile pass.  A swap replaces, under :attr:`fabric_lock`, every
        component holding the fabric: :attr:`fabric`, the scheduler (with the drained pools
        closed), the link board (circuits that stay keep their state and flap damping), the
        data plane's control and circuit rates, and the exports.  A version it cannot read is
        logged and left out; :class:`UnavailableError` surfaces (the database is down).
        """
        if self.in_force.newer() is None:
            return False
        with self.fabric_lock:
            newer = self.in_force.newer()  # again, alone: another thread may have swapped
            if newer is None:
                return False
            old = self.in_force.state
            if newer.version != old.version:
                self._refit(old.fabric, newer.fabric, newer.version)
            self.scheduler = Scheduler(
                newer.fabric, self._policy, drained=closed_pools(newer.fabric, newer.drains)
            )
            self.in_force.took(newer)
        return True

    def _refit(self, old: Fabric, fabric: Fabric, version: int) -> None:
        """Every component but the scheduler onto ``fabric``."""
        self.fabric = fabric
        self.links.refit(fabric, self.clock.now())
        self.data.fabric = fabric
        if fabric.circuits != old.circuits:
            # The rates come back two syncs later (they are never stored).
            self.data.rates = CircuitRates(fabric, stale_s=self._stale_s)
        self.exports.fabric = fabric
        _log.info(
            "fabric version %d is in force here: %s", version, fabric_diff(old, fabric).summary()
        )

    def fabric_in_force(self) -> FabricOut:
        """The fabric in force (as the database holds it) and the drains."""
        return self.in_force.show()

    def apply_fabric(self, body: FabricApply, *, by: str) -> FabricApplyOut:
        """Check ``body.yaml``, say what it changes and, unless a dry run, put it in force
        (:meth:`FabricInForce.apply`): this replica swaps at once, the others at their next
        :meth:`refresh_fabric`."""
        answer = self.in_force.apply(body, by=by)
        if answer.applied:
            self.refresh_fabric()
        return answer

    def drain(self, site: str, gpu_type: str | None, *, by: str, reason: str | None) -> DrainOut:
        """Drain ``site`` (``gpu_type`` None) or one of its pools: nothing new goes there,
        what runs there finishes.  Draining what is drained already changes nothing.
        :class:`NotFoundError` for a site or pool the fabric in force lacks."""
        self.require_site(site)
        if gpu_type is not None and self.fabric.site(site).pool(gpu_type) is None:
            pools = ", ".join(p.gpu_type for p in self.fabric.site(site).pools)
            msg = f"site {site} has no pool of GPU type {gpu_type!r}"
            raise NotFoundError(msg, hint=f"its pools: {pools}")
        drained = self.in_force.drain(site, gpu_type, by=by, reason=reason)
        self.refresh_fabric()
        return drained

    def undrain(self, site: str, gpu_type: str | None, *, by: str) -> list[DrainOut]:
        """Lift the drain of one pool, or (``gpu_type`` None) every drain at ``site``; the
        drains lifted (none: nothing was drained there)."""
        self.require_site(site)
        lifted = self.in_force.undrain(site, gpu_type, by=by)
        if lifted:
            self.refresh_fabric()
        return lifted

    # -- jobs -----------------------------------------------------------------------------

    def submit(self, body: JobSubmit) -> JobRecord:
        """Admit and store a job; :class:`ImpossibleJobError` if no site could ever run it."""
        return self.record_submissions([self.admit(body)])[0]

    def admit(self, body: JobSubmit) -> JobSpec:
        """The job a submission asks for; :class:`ImpossibleJobError` if it can never run.

        Its dataset must be declared in the fabric or registered (``dataset add``); without
        ``dataset_gb`` its size is its latest version's, else the fabric's figure.  Reads the
        store only for a dataset it does not know yet (:meth:`DataControl.knows`).
        """
        catalog = self.data.catalog(body.dataset)
        dataset_bytes = None
        if body.dataset_gb is None and body.dataset is not None:
            latest = catalog.latest.get(body.dataset)
            declared = self.fabric.dataset(body.dataset)
            if latest is not None:
                dataset_bytes = latest.bytes
            else:
                dataset_bytes = declared.size_bytes if declared is not None else 0
        spec = body.to_spec(dataset_bytes=dataset_bytes)
        self.scheduler.admit(spec, datasets=catalog.names)
        return spec

    def record_submissions(self, specs: Sequence[JobSpec]) -> list[JobRecord]:
        """Store admitted jobs in one transaction and queue them for the next pass."""
        records = self.store.add_jobs(specs, now=self.clock.now())
        for spec, record in zip(specs, records, strict=True):
            self.pending.added(
                PendingJob(job_id=record.id, spec=spec, submitted_at=record.submitted_at)
            )
        return records

    # -- tokens ---------------------------------------------------------------------------

    def create_token(self, body: TokenCreate) -> TokenOut:
        """Mint a token; the team or site it is scoped to must exist in the fabric."""
        if body.team is not None and self.fabric.team(body.team) is None:
            self.refresh_fabric()  # a team this replica does not know yet
        if body.team is not None and self.fabric.team(body.team) is None:
            msg = f"there is no team {body.team!r} in fabric {self.fabric.name}"
            known = ", ".join(t.name for t in self.fabric.teams)
            raise NotFoundError(msg, hint=f"known teams: {known}")
        if body.site is not None:
            self.require_site(body.site)
        secret = new_secret()
        record = self.store.add_token(
            role=body.role,
            sha256=hash_token(secret),
            now=self.clock.now(),
            team=body.team,
            site=body.site,
            holder=body.holder,
        )
        return TokenOut(
            token=secret,
            id=record.id,
            role=body.role,
            team=body.team,
            site=body.site,
            holder=body.holder,
        )

    # -- agents ---------------------------------------------------------------------------

    def agent_sync(self, site: str, body: AgentSync, *, received: float) -> AgentSyncReply:
        """Record a sync of ``site``'s agent (idempotently), renew the site's lease, and
        answer with the desired attempts, peers, routes and data orders.

        The caller has authenticated the agent of ``site``.  :class:`NotFoundError` for a
        site not in the fabric; :class:`ValidationError` for a capacity of GPU types the site
        has no pool of; :class:`UnavailableError` when the database cannot record it — and
        then no lease is granted.
        """
        self.require_site(site)
        known = {p.gpu_type for p in self.fabric.site(site).pools}
        unknown = sorted(set(body.capacity) - known)
        if unknown:
            msg = (
                f"the agent of {site} reports GPUs of types {', '.join(unknown)}, which site "
                f"{site} has no pool of in fabric {self.fabric.name}"
            )
            raise ValidationError(msg, hint=f"its pools: {', '.join(sorted(known)) or 'none'}")
        wanted = self.store.sync(
            site, sync_report(body), now=self.clock.now(), lease_s=self.config.lease_s
        )
        # After the attempts: a bad probe report must never cost a site its jobs (an agent
        # whose syncs fail fences itself); the reports that cannot be taken are named in the
        # reply.
        refused = self.take_link_reports(site, body, received=received)
        # The data part in a transaction of its own, for the same reason: it never fails.
        orders = self.data.take_report(site, body, received=received)
        return AgentSyncReply(
            heartbeat_interval_s=self.config.heartbeat_interval_s,
            lease_s=self.config.lease_s,
            attempts=[desired_attempt(a, grace_s=self.config.grace_s) for a in wanted],
            peers=self.links.peers(site),
            routes=self.links.routes(site),
            refused_links=refused,
            data=orders,
        )

    # -- links ----------------------------------------------------------------------------

    def take_link_reports(self, site: str, body: AgentSync, *, received: float) -> list[str]:
        """Feed the link board with a sync's probe reports and store the alerts; the reasons
        any report was refused (logged once per site and reason)."""
        refused = self.links.refusals(site, body.links, clocked=body.probe_clock_s is not None)
        for reason in refused:
            if (site, reason) not in self._refusals_logged:
                self._refusals_logged.add((site, reason))
                _links_log.warning("ignoring probe reports: %s", reason)
        self.links.report(
            site,
            body.agent_id,
            body.links,
            service_address=body.service_address,
            clock_s=body.probe_clock_s,
            now=received,
        )
        try:
            self.publish_alerts()
        except PlatformError as exc:  # the alerts wait for the reconcile loop's next try
            _links_log.warning("could not store link alerts yet: %s", exc.message)
        return refused

    def publish_alerts(self) -> None:
        """Store the link board's pending alerts as events (``GET /events``) and log them,
        in the order they happened, with the board's carry for the next leader when it
        changed or is :data:`_RESTAMP_S` old (one transaction:
        :mod:`onecluster.store._link_carry`; no carry from a board not in office); if the
        store fails they stay pending for the next try."""
        with self._alerts_lock:
            now = self.clock.now()
            alerts, carry = self.links.take_alerts_with_carry(now)
            shape = carry.shape()
            changed = self.links.office is not None and (
                shape != self._kept_shape or now - self._kept_at >= _RESTAMP_S
            )
            if not alerts and not changed:
                return
            events = [(a.kind, a.message) for a in alerts]
            try:
                body = _carry_json(carry) if changed else None
                self.store.keep_links(events, body, now=now)
            except BaseException:
                self.links.put_back(alerts)
                raise
            if changed:
                self._kept_shape, self._kept_at = shape, now
        for alert in alerts:
            _links_log.log(logging.WARNING if alert.warning else logging.INFO, "%s", alert.message)

    def resume_links(self, term: int) -> None:
        """As the leader of ``term`` (a new one, or a server started again): go on from the
        links the leader before kept, so that no circuit is judged again from nothing — no
        false ``down`` or ``up``, no route flap, no alert twice, flap damping kept
        (decision 169) — and keep them at once under this term.

        A replica that led the term before keeps its own board (pending alerts too).  A
        carry written in that term, at most :data:`_CARRY_MAX_AGE_S` ago, is taken whole;
        an older one only for its flap penalties, probe endpoints and route version; one
        that cannot be read is logged and the board starts blank."""
        with self._alerts_lock:
            if self.links.office == term:  # taking office failed later on, and is tried again
                return
            if self.links.last_office == term - 1:
                self.links.reinstate(term)
            else:
                self.links.resume(self._carried(term), self.clock.now(), term=term)
            self._kept_shape = None
        self.publish_alerts()

    def _carried(self, term: int) -> LinkCarry | None:
        """The carry to resume ``term`` from (see :meth:`resume_links`)."""
        kept = self.store.kept_links()
        if kept is None:
            return None
        try:
            carried = LinkCarry.from_dict(json.loads(kept.body)).aged(kept.age_s)
        except (ValueError, RecursionError) as exc:  # not JSON, or nested past the stack
            _links_log.warning("the links kept in the database are not JSON (%s)", exc)
            return None
        except ValidationError as exc:
            _links_log.warning("%s; %s", exc.message, exc.hint)
            return None
        if carried.term == term - 1 and kept.age_s <= _CARRY_MAX_AGE_S:
            return carried
        _links_log.info(
            "the links kept in the database are of term %d, %.0f s old: this leader (term %d) "
            "takes their flap damping, not their states",
            carried.term,
            kept.age_s,
            term,
        )
        return carried.unjudged()

    def circuit_load(self, now: float) -> dict[str, float]:
        """For the scheduler: each circuit's load, the larger of what its probes say (a
        circuit down is full) and the share of its capacity the data plane uses."""
        load = self.data.rates.load(now)
        for name, value in self.links.circuit_load().items():
            load[name] = max(load.get(name, 0.0), value)
        return load

    # -- cluster --------------------------------------------------------------------------

    def require_site(self, site: str) -> None:
        """:class:`NotFoundError` unless ``site`` is in the fabric in force (a site this
        replica does not know yet makes it look for a newer fabric first)."""
        if not self.fabric.has_site(site):
            self.refresh_fabric()
        require_site(self.fabric, site)

    def sites(self) -> list[SiteOut]:
        """Every site with its status, usage and drains."""
        found = sites_out(
            self.fabric,
            self.store.running_jobs(),
            self.store.sites(),
            now=self.clock.now(),
        )
        return mark_draining(found, self.store.drains())

    def teams(self) -> list[TeamOut]:
        """Every team with its usage."""
        return teams_out(self.fabric, self.store.running_jobs())

    def stats(self) -> StatsOut:
        """The cluster snapshot."""
        return stats_out(
            self.fabric,
            self.store.running_jobs(),
            self.store.job_counts(),
            preemptions=self.store.total_preemptions(),
            waits=self.store.waits(),
            pending_by_team=self.store.pending_by_team(),
            waiting_for_data=len({a.job_id for a in self.store.staging_attempts()}),
        )

    def gpu_report(self, month: str) -> dict[str, object]:
        """The monthly GPU report (JSON) from every attempt that ran in ``month``."""
        period = Month.parse(month)
        now = self.clock.now()
        records = [
            usage_record(attempt, job.team, job.spec(), now=now)
            for attempt, job in self.store.usage(period.start, period.end)
        ]
        return gpu_report(records, self.fabric, str(period)).to_json()

    def gpu_before_after(self, month: str, baseline: str) -> dict[str, object]:
        """Each team under the one queue and under ``baseline`` (``separate`` or ``fifo``),
        the month's jobs replayed in both (:func:`before_after`)."""
        period = Month.parse(month)
        if baseline not in ("separate", "fifo"):
            msg = f"cannot compare against {baseline!r}; use separate or fifo"
            raise ValidationError(msg)
        usage = self.store.usage(period.start, period.end)
        return before_after(self.fabric, period, usage, baseline=baseline, now=self.clock.now())


def _carry_json(carry: LinkCarry) -> str:
    """The link board's carry as the database keeps it."""
    return json.dumps(carry.as_dict(), separators=(",", ":"), allow_nan=False)

"""The site agent: a level-triggered loop between the control plane and a cluster backend.

Each turn polls the backend; when a sync is due it reports every attempt and the new log
text, receives the desired attempts and reconciles (see :mod:`onecluster.agent._reconcile`).
A server that cannot be reached or fails (5xx) never stops the loop: attempts keep running,
the sync is retried with exponential backoff capped at ``max_backoff_s`` (default 4 s), and a
warning line says so on every failed sync.  While the replicas elect a leader (one answers
``not_leader`` and none takes the sync) the retries come after 0.2 s, 0.4 s, then every 0.5 s
for about 10 s, instead of the heartbeat's doubling backoff: an election is over in about two
seconds, and the site should not wait a heartbeat or two more for its orders.

Leases and fencing: every sync the server answers grants the site a lease (``lease_s`` of
the reply): nobody else is given the site's work before it runs out.  The agent keeps its
attempts running through any outage for as long as its lease lasts, and stops them — SIGTERM
with a grace, SIGKILL at the agent's end of the lease (:class:`~onecluster.agent._lease.Lease`)
— only when it could not renew it, so that they are gone before the server may start their
jobs elsewhere.  Attempts the agent stopped itself are reported ``lost`` (never as their own
failure), and the server requeues their jobs.

A permanent refusal of a sync (the token is not this site's, or unknown; the body is refused;
the site is unknown) before the first successful sync ends the agent with the error's exit
code at once: it is misconfigured.  After that, the agent treats it like an outage until its
lease has run out (the operator has the lease to fix the server side), then exits with it.

Shutdown (the ``stop`` event of :meth:`Agent.run` is set, e.g. on SIGTERM/SIGINT): every
running attempt is stopped with ``stop_grace_s`` (SIGTERM, then SIGKILL), the agent waits for
them to end, reports them in one last best-effort sync as ``lost`` (the attempt did not fail
on its own: the site went away, so the server should requeue its job) and closes the backend.
Jobs are stopped rather than left running because nothing would follow or reap them once the
agent is gone, and a restarted agent reports such leftovers as ``lost`` anyway.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from onecluster.agent._data import SiteData
from onecluster.agent._lease import Lease
from onecluster.agent._links import SiteLinks
from onecluster.agent._logship import LogShipper
from onecluster.agent._own_stops import OwnStops
from onecluster.agent._reconcile import Actions, reconcile
from onecluster.agent._server_link import ServerLink, SyncLink
from onecluster.agent._watchdog import write_lease
from onecluster.backends import AttemptStatus, ClusterBackend
from onecluster.clock import Clock, MonotonicClock
from onecluster.errors import (
    AuthError,
    ConflictError,
    NotFoundError,
    NotLeaderError,
    PlatformError,
    ValidationError,
)
from onecluster.model import AttemptState
from onecluster.schema import AgentSync, AgentSyncReply, AttemptReport

__all__ = ["Agent", "AgentStats"]

#: Refusals that retrying cannot cure: a token that is not this site's or unknown, a site
#: the server does not know, a body (or a reply) the other side cannot read, another agent
#: that replaced this one at the site.
_PERMANENT = (AuthError, NotFoundError, ValidationError, ConflictError)

_log = logging.getLogger("onecluster.agent")

#: Bounds on the heartbeat interval a server may ask for.
_MIN_INTERVAL_S, _MAX_INTERVAL_S = 0.01, 60.0
#: Retries while the replicas elect a leader: the first after 0.2 s, doubled up to 0.5 s, for
#: this many failures in a row (about 10 s: an election takes about 2); then the usual backoff.
_ELECTION_RETRY_S, _ELECTION_RETRY_MAX_S, _ELECTION_RETRIES = 0.2, 0.5, 20
#: While a circuit just fell silent or recovered, sync this often (the server reroutes).
_ATTENTION_INTERVAL_S = 0.25
#: The longest rest between turns of an agent that probes.
_PROBE_TURN_S = 0.1
#: A sync is not started with less time than this before a lease deadline.
_MIN_SYNC_BUDGET_S = 0.2


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentStats:
    """A snapshot of the agent for dashboards and tests."""

    agent_id: str
    syncs_ok: int
    syncs_failed: int
    consecutive_failures: int
    last_sync_at: float | None
    started: int
    heartbeat_interval_s: float
    #: Whether the lease ran out unrenewed and the agent stopped its attempts.
    fenced: bool = False


class Agent:
    """Runs one site's attempts as the server desires them (``docs/contracts.md``).

    The server's ``heartbeat_interval_s`` (in every sync reply) replaces the configured one.
    ``link`` replaces the HTTP link to the server (``server_url``/``token`` are then unused):
    any :class:`~onecluster.agent.SyncLink`.
    ``data`` is the site's data plane (:mod:`onecluster.agent._data`): datasets scanned,
    received, served and relayed; every sync reports it and hands it the server's orders.
    ``links`` probes the site's circuits and follows the server's route table
    (:mod:`onecluster.agent._links`); while a circuit just fell silent or recovered the agent
    syncs every 0.25 s, so the server hears of it, and reroutes, without waiting a heartbeat.
    ``clock`` measures the lease: it must not jump (the default is monotonic).
    ``state_path`` keeps, across restarts of the agent, which attempts it stopped on its own
    (:mod:`onecluster.agent._own_stops`); give the same file to the next agent of the site.
    ``watched_dir``: the work directory whose watchdog guards this agent's lease
    (:mod:`onecluster.agent._watchdog`); the agent writes its lease there after every sync.
    ``clock`` must then be ``time.monotonic``'s, which the watchdog reads too.
    """

    def __init__(
        self,
        site: str,
        backend: ClusterBackend,
        server_url: str,
        token: str,
        *,
        clock: Clock | None = None,
        heartbeat_interval_s: float = 1.0,
        max_backoff_s: float = 4.0,
        stop_grace_s: float = 10.0,
        log_chunk_bytes: int = 65536,
        request_timeout_s: float = 5.0,
        link: SyncLink | None = None,
        links: SiteLinks | None = None,
        data: SiteData | None = None,
        state_path: Path | None = None,
        watched_dir: Path | None = None,
    ) -> None:
        self.agent_id = str(uuid.uuid4())
        self._site = site
        self._backend = backend
        self._server_url = server_url
        self._link: SyncLink = link or ServerLink(server_url, token, timeout_s=request_timeout_s)
        self._clock: Clock = clock or MonotonicClock()
        self._interval = heartbeat_interval_s
        self._max_backoff_s = max_backoff_s
        self._stop_grace_s = stop_grace_s
        self._request_timeout_s = request_timeout_s
        self._logs = LogShipper(backend, log_chunk_bytes)
        self._started: set[str] = set()
        #: Attempts this agent (or one before it) stopped on its own: reported ``lost``.
        self._stopped_by_agent = OwnStops(state_path, watchdog_dir=watched_dir)
        self._watched_dir = watched_dir
        #: Listed attempts that will not run here, reported until the server drops them.
        self._orphans: dict[str, str] = {}
        self._refused: dict[str, tuple[str, str]] = {}
        self._next_sync = float("-inf")
        self._ok = self._failed = self._failures = 0
        self._last_sync_at: float | None = None
        self._lease: Lease | None = None
        self._fenced = False
        self._refusal: PlatformError | None = None
        self._gave_up: PlatformError | None = None
        self._links = links
        self._data = data
        self._polled_at = float("-inf")

    @property
    def gave_up(self) -> PlatformError | None:
        """The permanent refusal the agent gave up on (its loop then ends), if any."""
        return self._gave_up

    @property
    def lease(self) -> Lease | None:
        """The lease of the last sync the server answered (``None`` before the first)."""
        return self._lease

    # -- one sync ---------------------------------------------------------------------------

    def sync_once(self) -> AgentSyncReply:
        """Poll the backend, report to the server, take the lease its answer grants and
        reconcile with it.

        Raises the link's :class:`PlatformError` when the server cannot be reached or refuses
        the sync; nothing is started or stopped then and log cursors do not move.
        """
        sent_at = self._clock.now()
        statuses = self._backend.poll()
        reply = self._report(statuses, timeout_s=self._sync_budget(sent_at))
        self._lease = Lease(sent_at=sent_at, length_s=reply.lease_s)
        if self._watched_dir is not None:  # before anything starts under the new lease
            kill_at = self._lease.ends_at + self._lease.margin_s / 2
            write_lease(self._watched_dir, agent_pid=os.getpid(), kill_at=kill_at)
        actions = reconcile(
            reply.attempts,
            statuses,
            started=self._started,
            drained=self._logs.drained,
            default_grace_s=self._stop_grace_s,
            agent_id=self.agent_id,
        )
        self._apply(actions)
        return reply

    def _report(
        self, statuses: list[AttemptStatus], *, timeout_s: float | None = None
    ) -> AgentSyncReply:
        batch = self._logs.collect(statuses)
        held = {s.attempt_id for s in statuses}
        attempts = [self._wire(s) for s in statuses]
        attempts += [
            AttemptReport(attempt_id=a, job_id=job, state="lost")
            for a, job in self._orphans.items()
            if a not in held
        ]
        attempts += [
            AttemptReport(attempt_id=a, job_id=job, state="refused", reason=why)
            for a, (job, why) in self._refused.items()
            if a not in held
        ]
        body = AgentSync(
            agent_id=self.agent_id,
            backend=self._backend.name,
            capacity=dict(self._backend.capacity()),
            problem=self._backend.problem(),
            attempts=attempts,
            logs=list(batch.chunks),
            service_address=self._links.service_address if self._links else None,
            links=self._links.reports() if self._links else [],
            probe_clock_s=self._links.clock() if self._links else None,
            data=self._data.report() if self._data else None,
        )
        reply = self._link.agent_sync(self._site, body, timeout_s=timeout_s)
        self._logs.commit(batch)
        if self._links is not None:
            self._links.delivered(reply)
        if self._data is not None:
            self._data.apply(reply.data)
        return reply

    def _wire(self, status: AttemptStatus) -> AttemptReport:
        state = status.state
        if state is AttemptState.EXITED and status.attempt_id in self._stopped_by_agent:
            state = AttemptState.LOST
        return AttemptReport(
            attempt_id=status.attempt_id,
            job_id=status.job_id,
            state=state.value,
            exit_code=status.exit_code,
            started_at=status.started_at,
            finished_at=status.finished_at,
            queued=status.queued,
            expected_start_at=status.expected_start_at,
            waiting_reason=status.waiting_reason,
        )

    def _apply(self, actions: Actions) -> None:
        """Carry out ``actions``; one that fails is logged and never stops the others."""
        for order in actions.stops:
            try:
                self._backend.stop(order.attempt_id, order.grace_s, order.reason)
            except (PlatformError, OSError) as exc:
                _log.warning("cannot stop attempt %s: %s", order.attempt_id, exc)
        for spec in actions.starts:
            try:
                self._backend.start(spec)
            except (PlatformError, OSError) as exc:
                _log.warning(
                    "cannot start attempt %s of job %s yet: %s; retrying on the next sync",
                    spec.attempt_id,
                    spec.job_id,
                    exc,
                )
                continue
            self._started.add(spec.attempt_id)
            _log.info("started attempt %s of job %s", spec.attempt_id, spec.job_id)
        for attempt_id in actions.forgets:
            self._backend.forget(attempt_id)
            self._logs.forget(attempt_id)
            self._stopped_by_agent.discard(attempt_id)
        orphans = {o.attempt_id: o.job_id for o in actions.orphans}
        for attempt_id in orphans.keys() - self._orphans.keys():
            _log.warning(
                "attempt %s is not running here and will not be started by this agent "
                "(it was handed to an earlier agent of the site, or ended unseen); "
                "reporting it lost",
                attempt_id,
            )
        self._orphans = orphans
        refused = {r.attempt_id: (r.job_id, r.message) for r in actions.rejected}
        for attempt_id in refused.keys() - self._refused.keys():
            _log.error("refusing attempt %s: %s", attempt_id, refused[attempt_id][1])
        self._refused = refused

    # -- the loop ---------------------------------------------------------------------------

    def step(self) -> float:
        """One turn: poll the backend, sync if one is due (backing off after failures), and
        stop every attempt when the lease runs out unrenewed.

        Returns the seconds until the next turn.  A failed sync is logged, never raised.
        """
        now = self._clock.now()
        if self._links is not None and self._failures == 0 and self._links.attention():
            self._next_sync = min(
                self._next_sync, (self._last_sync_at or now) + _ATTENTION_INTERVAL_S
            )
        self._fence_if_due(now)
        if self._gave_up is not None:
            return 0.0
        if now < self._next_sync or not self._may_sync(now):
            # Reap exits and escalate overdue stops between syncs — once a heartbeat, as
            # before probing made the turns shorter: probes must not multiply backend work.
            # While fenced, every turn: the SIGKILLs are due at the end of the lease.
            if now - self._polled_at >= self._interval or self._fenced:
                self._polled_at = now
                self._backend.poll()
            wait = self._next_sync - now if now < self._next_sync else self._turn()
            return self._rest(now, min(self._turn(), wait))
        try:
            reply = self.sync_once()
        except PlatformError as exc:
            self._failed_sync(exc, now)
            # The sync may have taken until a lease deadline: act on it now, not next turn.
            after = self._clock.now()
            self._fence_if_due(after)
            if self._fenced:
                self._backend.poll()  # SIGKILL whatever is due
            return self._rest(after, min(self._interval, max(self._next_sync - after, 0.0)))
        if self._fenced:
            _log.warning(
                "sync with %s works again; this agent holds the site again", self._server_url
            )
        self._fenced = False
        self._refusal = None
        if self._failures:
            _log.warning(
                "sync with %s works again after %d failures", self._server_url, self._failures
            )
        self._ok += 1
        self._failures = 0
        self._last_sync_at = now
        self._interval = min(max(reply.heartbeat_interval_s, _MIN_INTERVAL_S), _MAX_INTERVAL_S)
        self._next_sync = now + self._interval
        return self._rest(now, self._turn())

    def _failed_sync(self, exc: PlatformError, now: float) -> None:
        """Count a failed sync, schedule the retry, and give up on a permanent refusal when
        nothing of the site can still be at stake."""
        self._failed += 1
        self._failures += 1
        delay = min(self._interval * 2.0 ** min(self._failures - 1, 16), self._max_backoff_s)
        if isinstance(exc, NotLeaderError) and self._failures <= _ELECTION_RETRIES:
            election = _ELECTION_RETRY_S * 2.0 ** (self._failures - 1)
            delay = min(delay, election, _ELECTION_RETRY_MAX_S)
        self._next_sync = now + delay
        if isinstance(exc, _PERMANENT):
            self._refusal = exc
            if self._lease is None or now >= self._lease.ends_at:
                self._gave_up = exc
                _log.error(
                    "the server at %s refused this agent (%s: %s); it cannot work for site %s "
                    "and exits",
                    self._server_url,
                    exc.code,
                    exc.message,
                    self._site,
                )
                if exc.hint:
                    _log.error("hint: %s", exc.hint)
                return
            _log.error(
                "the server at %s refused the sync (%s: %s); attempts keep running until the "
                "lease ends in %.0f s, then the agent exits unless the refusal is lifted",
                self._server_url,
                exc.code,
                exc.message,
                self._lease.ends_at - now,
            )
            return
        self._refusal = None
        if not self._fenced:
            where = "attempts keep running"
        elif self._lease is not None and now < self._lease.ends_at:
            where = "its attempts are being stopped (the lease is running out)"
        else:
            where = "the lease has ended; its attempts are stopped"
        _log.warning(
            "sync with %s failed (%s: %s); %s; retry %d in %.1f s",
            self._server_url,
            exc.code,
            exc.message,
            where,
            self._failures,
            delay,
        )

    def _sync_budget(self, now: float) -> float | None:
        """How long a sync starting now may take: until the lease's next deadline — the
        fence, or once fenced the SIGKILL at its end — which a hanging request must not
        delay; ``None`` when no lease is at stake (none yet, or it ended)."""
        lease = self._lease
        if lease is None or now >= lease.ends_at:
            return None
        deadline = lease.ends_at if self._fenced else lease.fence_at(self._stop_grace_s)
        return min(max(deadline - now, 0.0), self._request_timeout_s * 3)

    def _may_sync(self, now: float) -> bool:
        """Whether a sync may start: not in the last moments before a lease deadline."""
        budget = self._sync_budget(now)
        return budget is None or budget >= _MIN_SYNC_BUDGET_S

    def _rest(self, now: float, delay: float) -> float:
        """``delay``, shortened to wake up when the lease calls for it (fence, kill)."""
        lease = self._lease
        if lease is None:
            return delay
        for moment in (lease.fence_at(self._stop_grace_s), lease.ends_at):
            if moment > now:
                delay = min(delay, moment - now)
        return max(delay, 0.0)

    def _turn(self) -> float:
        """How long to rest between turns: a heartbeat, or at most 0.1 s while probing, so
        that a circuit falling silent is reported at once (:meth:`SiteLinks.attention`)."""
        return self._interval if self._links is None else min(self._interval, _PROBE_TURN_S)

    def _fence_if_due(self, now: float) -> None:
        """Stop every attempt when the lease runs out unrenewed, so none runs twice; give up
        once it has run out after a permanent refusal."""
        lease = self._lease
        if lease is None:
            return
        if self._refusal is not None and now >= lease.ends_at and self._gave_up is None:
            self._gave_up = self._refusal
            _log.error(
                "the server kept refusing this agent (%s) until its lease ran out; exiting",
                self._refusal.message,
            )
        if self._fenced and now >= lease.ends_at:
            self._kill_what_is_left()
        if self._fenced or now < lease.fence_at(self._stop_grace_s):
            return
        self._fenced = True
        grace = max(lease.ends_at - now, 0.0)
        running = [s for s in self._backend.poll() if s.state is AttemptState.RUNNING]
        self._stopped_by_agent.add(s.attempt_id for s in running)
        for status in running:
            self._backend.stop(status.attempt_id, grace, "the agent could not renew its lease")
        _log.error(
            "no sync with %s for %.0f s: its lease of %.0f s ends in %.1f s; stopping %d "
            "attempt(s) (SIGKILL in %.1f s) so that none runs twice; the server requeues their "
            "jobs",
            self._server_url,
            now - lease.sent_at,
            lease.length_s,
            lease.ends_at - now,
            len(running),
            grace,
        )

    def _kill_what_is_left(self) -> None:
        """At the end of the lease: SIGKILL now whatever still runs (the backend's own deadline,
        on its own clock, may fall a moment later)."""
        for status in self._backend.poll():
            if status.state is AttemptState.RUNNING:
                self._stopped_by_agent.add([status.attempt_id])
                self._backend.stop(status.attempt_id, 0.0, "the agent's lease ran out")

    def run(self, stop: threading.Event) -> None:
        """Turn until ``stop`` is set or the agent gives up (:attr:`gave_up`), then
        :meth:`shutdown`.  Never raises."""
        _log.info(
            "agent %s for site %s syncing with %s", self.agent_id, self._site, self._server_url
        )
        while not stop.is_set() and self._gave_up is None:
            try:
                delay = self.step()
            except Exception:  # noqa: BLE001 - the loop must outlive a bug in any one turn
                _log.exception("an agent turn failed; continuing")
                delay = self._interval
            if self._gave_up is None:
                stop.wait(delay)
        self.shutdown()

    def shutdown(self) -> None:
        """Stop every running attempt with ``stop_grace_s``, wait for them, report them as
        ``lost`` in a last sync (best effort), then close the backend and the link."""
        try:
            statuses = self._backend.poll()
            running = [s.attempt_id for s in statuses if s.state is AttemptState.RUNNING]
            self._stopped_by_agent.add(running)
            for attempt_id in running:
                self._backend.stop(attempt_id, self._stop_grace_s, "the agent is shutting down")
            deadline = time.monotonic() + self._stop_grace_s + 1.0
            while any(s.state is AttemptState.RUNNING for s in statuses):
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.02)
                statuses = self._backend.poll()
            if self._gave_up is None:
                try:
                    self._report(statuses)
                except PlatformError as exc:
                    _log.warning("could not report the final state to the server: %s", exc.message)
        finally:
            self._backend.close(grace_s=0.5)
            if self._watched_dir is not None:  # nothing left to guard
                write_lease(self._watched_dir, agent_pid=os.getpid(), kill_at=None)
            self._link.close()
            if self._links is not None:
                self._links.close()
            if self._data is not None:
                self._data.close()
        _log.info("agent %s stopped", self.agent_id)

    def statistics(self) -> AgentStats:
        """A frozen snapshot of the agent's counters."""
        return AgentStats(
            agent_id=self.agent_id,
            syncs_ok=self._ok,
            syncs_failed=self._failed,
            consecutive_failures=self._failures,
            last_sync_at=self._last_sync_at,
            started=len(self._started),
            heartbeat_interval_s=self._interval,
            fenced=self._fenced,
        )

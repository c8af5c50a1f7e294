"""The site agent: a level-triggered loop between the control plane and a cluster backend.

Each turn polls the backend; when a sync is due it reports every attempt and the new log
text, receives the desired attempts and reconciles (see :mod:`onecluster.agent._reconcile`).
A server that cannot be reached or fails (5xx) never stops the loop: attempts keep running,
the sync is retried with exponential backoff capped at ``max_backoff_s`` (default 4 s, well
inside the server's lease), and a warning line says so on every failed sync.

Fencing: the server gives a silent site's work to other sites after its lease (``lease_s`` in
every sync reply, the server's ``agent_timeout_s``).  An agent that has not synced for half
the lease stops every attempt it runs, with a grace short enough that they are gone before the
lease ends, so a job never runs in two places at once.  The attempts are reported (as ended)
when the server answers again; the server has requeued their jobs by then.

Shutdown (the ``stop`` event of :meth:`Agent.run` is set, e.g. on SIGTERM/SIGINT): every
running attempt is stopped with ``stop_grace_s`` (SIGTERM, then SIGKILL), the agent waits for
them to end, reports them in one last best-effort sync as ``lost`` (the attempt did not fail
on its own: the site went away, so the server should requeue its job) and closes the backend.
Jobs are stopped rather than left running because nothing would follow or reap them once the
agent is gone, and a restarted agent reports such leftovers as ``lost`` anyway.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass

from onecluster.agent._links import SiteLinks
from onecluster.agent._logship import LogShipper
from onecluster.agent._reconcile import Actions, reconcile
from onecluster.agent._server_link import ServerLink, SyncLink
from onecluster.backends import AttemptStatus, ClusterBackend
from onecluster.clock import Clock, SystemClock
from onecluster.errors import PlatformError
from onecluster.model import AttemptState
from onecluster.schema import AgentSync, AgentSyncReply, AttemptReport

__all__ = ["Agent", "AgentStats"]

#: The lease assumed until the server's first answer says otherwise.
_DEFAULT_LEASE_S = 10.0

_log = logging.getLogger("onecluster.agent")

#: Bounds on the heartbeat interval a server may ask for.
_MIN_INTERVAL_S, _MAX_INTERVAL_S = 0.01, 60.0
#: While a circuit just fell silent or recovered, sync this often (the server reroutes).
_ATTENTION_INTERVAL_S = 0.25
#: The longest rest between turns of an agent that probes.
_PROBE_TURN_S = 0.1


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


class Agent:
    """Runs one site's attempts as the server desires them (``docs/contracts.md``).

    The server's ``heartbeat_interval_s`` (in every sync reply) replaces the configured one.
    ``link`` replaces the HTTP link to the server (``server_url``/``token`` are then unused);
    anything with ``agent_sync(site, body)`` and ``close()`` fits, such as the SDK's client.
    ``links`` probes the site's circuits and follows the server's route table
    (:mod:`onecluster.agent._links`); while a circuit just fell silent or recovered the agent
    syncs every 0.25 s, so the server hears of it, and reroutes, without waiting a heartbeat.
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
    ) -> None:
        self.agent_id = str(uuid.uuid4())
        self._site = site
        self._backend = backend
        self._server_url = server_url
        self._link: SyncLink = link or ServerLink(server_url, token, timeout_s=request_timeout_s)
        self._clock: Clock = clock or SystemClock()
        self._interval = heartbeat_interval_s
        self._max_backoff_s = max_backoff_s
        self._stop_grace_s = stop_grace_s
        self._logs = LogShipper(backend, log_chunk_bytes)
        self._started: set[str] = set()
        self._rejected: set[str] = set()
        self._shut_down: set[str] = set()
        self._next_sync = float("-inf")
        self._ok = self._failed = self._failures = 0
        self._last_sync_at: float | None = None
        self._lease_s = _DEFAULT_LEASE_S
        self._fenced = False
        self._links = links
        self._polled_at = float("-inf")

    # -- one sync ---------------------------------------------------------------------------

    def sync_once(self) -> AgentSyncReply:
        """Poll the backend, report to the server, reconcile with its reply.

        Raises the link's :class:`PlatformError` when the server cannot be reached or refuses
        the sync; nothing is started or stopped then and log cursors do not move.
        """
        statuses = self._backend.poll()
        reply = self._report(statuses)
        actions = reconcile(
            reply.attempts,
            statuses,
            started=self._started,
            drained=self._logs.drained,
            default_grace_s=self._stop_grace_s,
        )
        self._apply(actions)
        return reply

    def _report(self, statuses: list[AttemptStatus]) -> AgentSyncReply:
        batch = self._logs.collect(statuses)
        body = AgentSync(
            agent_id=self.agent_id,
            backend=self._backend.name,
            capacity=dict(self._backend.capacity()),
            problem=self._backend.problem(),
            attempts=[self._wire(s) for s in statuses],
            logs=list(batch.chunks),
            service_address=self._links.service_address if self._links else None,
            links=self._links.reports() if self._links else [],
            probe_clock_s=self._links.clock() if self._links else None,
        )
        reply = self._link.agent_sync(self._site, body)
        self._logs.commit(batch)
        if self._links is not None:
            self._links.delivered(reply)
        return reply

    def _wire(self, status: AttemptStatus) -> AttemptReport:
        state = status.state
        if state is AttemptState.EXITED and status.attempt_id in self._shut_down:
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
            self._shut_down.discard(attempt_id)
        for rejected in actions.rejected:
            if rejected.attempt_id not in self._rejected:
                self._rejected.add(rejected.attempt_id)
                _log.error("refusing attempt %s: %s", rejected.attempt_id, rejected.message)

    # -- the loop ---------------------------------------------------------------------------

    def step(self) -> float:
        """One turn: poll the backend, and sync if one is due (backing off after failures).

        Returns the seconds until the next turn.  A failed sync is logged, never raised.
        """
        now = self._clock.now()
        if self._links is not None and self._failures == 0 and self._links.attention():
            self._next_sync = min(
                self._next_sync, (self._last_sync_at or now) + _ATTENTION_INTERVAL_S
            )
        if now < self._next_sync:
            # Reap exits and escalate overdue stops between syncs — once a heartbeat, as
            # before probing made the turns shorter: probes must not multiply backend work.
            if now - self._polled_at >= self._interval:
                self._polled_at = now
                self._backend.poll()
            return min(self._turn(), self._next_sync - now)
        try:
            reply = self.sync_once()
        except PlatformError as exc:
            self._failed += 1
            self._failures += 1
            delay = min(self._interval * 2.0 ** min(self._failures - 1, 16), self._max_backoff_s)
            self._next_sync = now + delay
            _log.warning(
                "sync with %s failed (%s: %s); attempts keep running; retry %d in %.1f s",
                self._server_url,
                exc.code,
                exc.message,
                self._failures,
                delay,
            )
            self._fence_if_cut_off(now)
            return min(self._interval, delay)
        self._fenced = False
        if self._failures:
            _log.warning(
                "sync with %s works again after %d failures", self._server_url, self._failures
            )
        self._ok += 1
        self._failures = 0
        self._last_sync_at = now
        self._interval = min(max(reply.heartbeat_interval_s, _MIN_INTERVAL_S), _MAX_INTERVAL_S)
        self._lease_s = max(reply.lease_s, 2 * _MIN_INTERVAL_S)
        self._next_sync = now + self._interval
        return self._turn()

    def _turn(self) -> float:
        """How long to rest between turns: a heartbeat, or at most 0.1 s while probing, so
        that a circuit falling silent is reported at once (:meth:`SiteLinks.attention`)."""
        return self._interval if self._links is None else min(self._interval, _PROBE_TURN_S)

    def _fence_if_cut_off(self, now: float) -> None:
        """Stop every attempt once the server has been silent for half its lease."""
        if self._fenced or self._last_sync_at is None:
            return
        silent = now - self._last_sync_at
        if silent < self._lease_s / 2:
            return
        self._fenced = True
        grace = max(min(self._stop_grace_s, self._lease_s / 2 - 1.0), 0.5)
        running = [s for s in self._backend.poll() if s.state is AttemptState.RUNNING]
        for status in running:
            self._backend.stop(status.attempt_id, grace, "the agent lost the control plane")
        _log.error(
            "no sync with %s for %.0f s (lease %.0f s): stopped %d attempts with %.1f s of grace "
            "so that none runs twice; the server requeues their jobs",
            self._server_url,
            silent,
            self._lease_s,
            len(running),
            grace,
        )

    def run(self, stop: threading.Event) -> None:
        """Turn until ``stop`` is set, then :meth:`shutdown`.  Never raises."""
        _log.info(
            "agent %s for site %s syncing with %s", self.agent_id, self._site, self._server_url
        )
        while not stop.is_set():
            try:
                delay = self.step()
            except Exception:  # noqa: BLE001 - the loop must outlive a bug in any one turn
                _log.exception("an agent turn failed; continuing")
                delay = self._interval
            stop.wait(delay)
        self.shutdown()

    def shutdown(self) -> None:
        """Stop every running attempt with ``stop_grace_s``, wait for them, report them as
        ``lost`` in a last sync (best effort), then close the backend and the link."""
        try:
            statuses = self._backend.poll()
            for status in statuses:
                if status.state is AttemptState.RUNNING:
                    self._shut_down.add(status.attempt_id)
                    self._backend.stop(
                        status.attempt_id, self._stop_grace_s, "the agent is shutting down"
                    )
            deadline = time.monotonic() + self._stop_grace_s + 1.0
            while any(s.state is AttemptState.RUNNING for s in statuses):
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.02)
                statuses = self._backend.poll()
            try:
                self._report(statuses)
            except PlatformError as exc:
                _log.warning("could not report the final state to the server: %s", exc.message)
        finally:
            self._backend.close(grace_s=0.5)
            self._link.close()
            if self._links is not None:
                self._links.close()
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
        )

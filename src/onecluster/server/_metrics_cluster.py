"""The state of the cluster as metric families, read at scrape time.

Jobs, pools and sites come from the store, circuits and routes from the link board (on the
leader only: a follower's board stands by), transfers from the store with their progress
ages (:class:`ProgressAges`), and the register from its last verification
(:class:`RegisterWatch`).  A section that cannot be read (the database is down) is logged
and left out of the scrape, and ``onecluster_metrics_section_up{section}`` says so; the
other sections are still there.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from onecluster.model import JobState
from onecluster.server._control import ControlPlane
from onecluster.server._election import Election
from onecluster.server._register_watch import RegisterWatch
from onecluster.server._transfer_progress import ProgressAges

__all__ = ["ClusterCollector"]

_log = logging.getLogger("onecluster.metrics")

SITE_STATUSES = ("unknown", "up", "degraded", "down")
CIRCUIT_STATES = ("unknown", "up", "degraded", "down")
#: The job states a job is in while it is not over (a partition: each job counts in one).
LIVE_JOB_STATES = (JobState.PENDING, JobState.RUNNING, JobState.PREEMPTING, JobState.CANCELLING)

Section = Callable[[], list[Metric]]
Key = TypeVar("Key", bound=tuple[str, ...])


def _gauge(name: str, documentation: str, *labels: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=list(labels))


def _single(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _counted(
    name: str,
    documentation: str,
    labels: tuple[str, ...],
    counts: Mapping[Key, float],
) -> GaugeMetricFamily:
    """A gauge with one sample per key of ``counts`` (the label values, in order)."""
    family = _gauge(name, documentation, *labels)
    for key, n in sorted(counts.items()):
        family.add_metric(list(key), n)
    return family


class ClusterCollector(Collector):
    """Every ``onecluster_*`` family that describes state; see ``docs/noc.md``."""

    def __init__(self, control: ControlPlane, election: Election, register: RegisterWatch) -> None:
        self._control = control
        self._election = election
        self._register = register
        self._progress = ProgressAges()

    def collect(self) -> Iterator[Metric]:
        """Each section's families, then whether each section could be read."""
        sections: dict[str, Section] = {
            "leader": self._leader,
            "jobs": self._jobs,
            "sites": self._sites,
            "circuits": self._circuits,
            "transfers": self._transfers,
            "register": self._registry,
        }
        up = _gauge(
            "onecluster_metrics_section_up",
            "Whether a section of the server's metrics could be read at this scrape.",
            "section",
        )
        for name, section in sections.items():
            try:
                families = section()
            except Exception:  # noqa: BLE001 -- one section failing must not fail the scrape
                _log.exception("the %s metrics could not be read; left out of this scrape", name)
                up.add_metric([name], 0)
                continue
            up.add_metric([name], 1)
            yield from families
        yield up

    def _leader(self) -> list[Metric]:
        stats = self._election.statistics()
        return [
            _single(
                "onecluster_leader",
                "1 while this server replica leads the control plane.",
                1 if stats.leading else 0,
            ),
            _single(
                "onecluster_leader_term",
                "The leadership term this replica leads in or last saw.",
                stats.term,
            ),
        ]

    def _jobs(self) -> list[Metric]:
        c = self._control
        jobs = _gauge(
            "onecluster_jobs",
            "Jobs not over, by team, state and (for those holding GPUs) site; a job running "
            "at two sites counts at each.",
            "team",
            "site",
            "state",
        )
        pending = c.store.pending_by_team()
        for team in sorted({t.name for t in c.fabric.teams} | set(pending)):
            jobs.add_metric([team, "", JobState.PENDING.value], pending.get(team, 0))
        held: Counter[tuple[str, str, str]] = Counter()
        borrowed: Counter[tuple[str, str]] = Counter()
        running = c.store.running_jobs()
        for job, attempts in running:
            for site in sorted({a.site for a in attempts}):
                held[(job.team, site, job.state.value)] += 1
            for site in sorted({a.site for a in attempts if a.borrowed}):
                borrowed[(job.team, site)] += 1
        for (team, site, state), n in sorted(held.items()):
            if state != JobState.PENDING.value:
                jobs.add_metric([team, site, state], n)
        lent = _counted(
            "onecluster_jobs_borrowed",
            "Jobs running on GPUs beyond their team's quota, by team and site.",
            ("team", "site"),
            borrowed,
        )
        teams = {job.id: job.team for job, _ in running}
        waiting = Counter((teams.get(a.job_id, ""), a.site) for a in c.store.staging_attempts())
        data = _counted(
            "onecluster_jobs_waiting_for_data",
            "Jobs placed at a site that wait for their dataset to arrive there.",
            ("team", "site"),
            waiting,
        )
        return [jobs, lent, data]

    def _sites(self) -> list[Metric]:
        c = self._control
        now = c.clock.now()
        capacity = _gauge("onecluster_pool_gpus", "GPUs in a pool.", "site", "gpu_type")
        used = _gauge(
            "onecluster_pool_gpus_used", "GPUs of a pool held by attempts.", "site", "gpu_type"
        )
        draining = _gauge(
            "onecluster_pool_draining",
            "1 while a pool (or its site) is drained.",
            "site",
            "gpu_type",
        )
        status = _gauge(
            "onecluster_site_status",
            "1 for the status a site is in (unknown, up, degraded, down), else 0.",
            "site",
            "status",
        )
        age = _gauge(
            "onecluster_site_last_sync_age_seconds",
            "Seconds since the site's agent last synced (absent before its first sync).",
            "site",
        )
        for site in c.sites():
            for pool in site.pools:
                labels = [site.name, pool.gpu_type]
                capacity.add_metric(labels, pool.count)
                used.add_metric(labels, pool.used)
                draining.add_metric(labels, 1 if pool.draining or site.draining else 0)
            for value in SITE_STATUSES:
                status.add_metric([site.name, value], 1 if site.status == value else 0)
            if site.last_heartbeat is not None:
                age.add_metric([site.name], max(0.0, now - site.last_heartbeat))
        return [capacity, used, draining, status, age]

    def _circuits(self) -> list[Metric]:
        board = self._control.links
        if board.office is None:  # a follower's board stands by: the leader's says
            return []
        now = self._control.clock.now()
        state = _gauge(
            "onecluster_circuit_state",
            "1 for the state the leader judges a circuit in (unknown, up, degraded, down).",
            "circuit",
            "state",
        )
        rtt = _gauge(
            "onecluster_circuit_rtt_min_seconds",
            "The lowest minimum RTT either fresh end of a circuit measured.",
            "circuit",
        )
        loss = _gauge(
            "onecluster_circuit_loss_ratio",
            "The higher loss ratio of a circuit's two ends, over their probe windows.",
            "circuit",
        )
        for link in board.links(now):
            for value in CIRCUIT_STATES:
                state.add_metric([link.circuit, value], 1 if link.state == value else 0)
            reported = [e.loss for e in link.ends if e.reported_at is not None]
            if reported:
                loss.add_metric([link.circuit], max(reported))
        for circuit, ms in sorted(board.measured_rtt_ms(now).items()):
            rtt.add_metric([circuit], ms / 1000)
        changes = CounterMetricFamily(
            "onecluster_route_changes",
            "Changes of the route table the sites follow (a circuit cut or back, a fabric "
            "applied).",
        )
        changes.add_metric([], board.statistics().route_version - 1)
        return [state, rtt, loss, changes]

    def _transfers(self) -> list[Metric]:
        c = self._control
        transfers = c.store.transfers(active_only=True, limit=10_000)
        count: Counter[tuple[str, str, str]] = Counter()
        bytes_done: Counter[tuple[str, str]] = Counter()
        bytes_total: Counter[tuple[str, str]] = Counter()
        for t in transfers:
            count[(t.src, t.dst, t.state)] += 1
            bytes_done[(t.src, t.dst)] += t.bytes_done
            bytes_total[(t.src, t.dst)] += t.bytes_total
        ages = self._progress.look(transfers, c.clock.now())
        pair = ("src", "dst")
        return [
            _counted(
                "onecluster_transfers_in_flight",
                "Transfers not ended, by source site, destination site and state.",
                (*pair, "state"),
                count,
            ),
            _counted(
                "onecluster_transfer_done_bytes",
                "Bytes verified at the destination, summed over the transfers in flight.",
                pair,
                bytes_done,
            ),
            _counted(
                "onecluster_transfer_size_bytes",
                "Bytes to bring, summed over the transfers in flight.",
                pair,
                bytes_total,
            ),
            _counted(
                "onecluster_transfer_progress_age_seconds",
                "The longest a running or waiting transfer between two sites has gone without "
                "bytes done growing (as this server saw it).",
                pair,
                ages,
            ),
        ]

    def _registry(self) -> list[Metric]:
        check = self._register.check()
        families: list[Metric] = [
            _single(
                "onecluster_register_verified",
                "1 if the export register verified at its last check (signatures, tree head, "
                "entries), 0 if it did not.",
                1 if check.ok else 0,
            ),
            _single(
                "onecluster_register_last_check_timestamp_seconds",
                "When the export register was last verified (Unix time).",
                check.at,
            ),
            _single(
                "onecluster_register_entries",
                "Entries covered by the register's signed tree head.",
                check.size,
            ),
        ]
        if check.last_ok_at is not None:
            families.append(
                _single(
                    "onecluster_register_last_success_timestamp_seconds",
                    "When the export register last verified (Unix time).",
                    check.last_ok_at,
                )
            )
        return families

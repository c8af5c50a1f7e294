"""The control plane's fault drill (issue 17): two server replicas on one PostgreSQL database,
three agents and a steady stream of submissions, with jobs that run for tens of seconds, go
through every failure of the control plane in turn:

1. the leader is SIGKILLed: the other replica takes over and places work;
2. the new leader is SIGKILLed and the first replica started again: it leads and places work
   (then the other is started again, as a follower);
3. both replicas are stopped for 60 s: jobs running then (some of them long enough to span the
   whole outage) keep running, nothing is placed, and once the replicas are back everything
   goes on;
4. the leader is frozen (SIGSTOP) for longer than its leader lease, so that the other takes
   over, then woken (SIGCONT) still believing it leads: afterwards exactly one replica leads,
   and the woken one has done no harm;
5. a fabric that adds a site (with its pool and a circuit) and a pool at a running site is
   applied with ``onecluster fabric apply`` while jobs run: both replicas show it, and work
   goes on being placed.

Throughout: every submission answered 201 exists, no job is lost (every job the server knows
completes with exit 0) and none runs twice.  Runs are counted from the agents' side, not the
server's: each job's command appends a line to one file when it starts and when it ends
(``$ONECLUSTER_JOB_ID`` and ``$ONECLUSTER_ATTEMPT_ID``, set by the agent's local backend), so
a job started twice shows two starts whatever the database says.  Jobs ask for one GPU of
their team's own types, well within its quota, so nothing is preempted and one start per job
is exactly right; none asks for the GPU types the new fabric adds, so none waits on the new
site, which has no agent.

Real processes on loopback: PostgreSQL (a database of this run's own in the cluster that
``ONECLUSTER_TEST_PG_URL`` names, created here and dropped at the end), two ``onecluster
server`` replicas (each with its own ``--state-dir``, the default ``--leader-lease`` of 2 s and
the default site ``--lease``), three ``onecluster agent`` (local backend, ``--server A,B``),
the jobs, and the CLI for the fabric.  The 60 s outage and the freeze are the scenario's own
durations; everything else waits on a condition with a deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
import pytest

from onecluster.client import Client
from onecluster.errors import PlatformError
from onecluster.fabric import dump_fabric, load_fabric
from onecluster.model import TERMINAL_STATES, Circuit, GpuPool, JobState, Site
from onecluster.schema import EventOut, JobOut, JobSubmit, TokenCreate

pytestmark = [
    pytest.mark.slow,
    pytest.mark.integration,
    pytest.mark.postgres,
    pytest.mark.timeout(480),
]

ROOT = Path(__file__).resolve().parents[2]
FABRIC = ROOT / "examples" / "fabrics" / "three-site.yaml"
#: What each site's jobs ask for: a team and GPU types that only that site has (H100: either
#: Singapore or Tokyo), one GPU each, far below every team's quota.
KINDS = (("llm", "H800"), ("vision", "H100"), ("speech", "L40S"))
SITES = ("shanghai", "singapore", "tokyo")
SUBMIT_EVERY_S = 0.4
OUTAGE_S = 60.0  # the scenario: no replica at all for this long
FREEZE_S = 6.0  # the scenario: the leader frozen for three leader leases (2 s each)
LONG_JOB_S = 80  # outlives the whole outage
BUSY = 20  # jobs running at once when each fault strikes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Plane:
    """Replicas ``a`` and ``b`` and the three agents as child processes, each in a session
    of its own; :meth:`close` ends every one of them (and what they left running)."""

    def __init__(self, tmp: Path, db_url: str) -> None:
        self.tmp = tmp
        self.db_url = db_url
        self.urls = {name: f"http://127.0.0.1:{_free_port()}" for name in ("a", "b")}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.runs = tmp / "runs.log"  # the jobs' own record of their starts and ends
        self.runs.touch()

    # -- processes ----------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        with (self.tmp / f"{name}.log").open("ab") as log:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "onecluster.cli", *argv],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env if env is not None else dict(os.environ),
                cwd=self.tmp,
                start_new_session=True,
            )

    def start_server(self, name: str) -> None:
        url = self.urls[name]
        argv = ["--state-dir", str(self.tmp / f"state-{name}"), "server"]
        argv += ["--fabric", str(FABRIC), "--db", self.db_url, "--port", url.rsplit(":", 1)[1]]
        argv += ["--advertise-url", url, "--leader-lease", "2"]
        self._spawn(name, argv)
        wait_until(f"replica {name} answers", lambda: self.health(name) is not None, 60, self)

    def start_agent(self, site: str, token: str) -> None:
        env = {**os.environ, "ONECLUSTER_TOKEN": token}
        argv = ["--server", ",".join(self.urls.values()), "agent", "--site", site]
        argv += ["--backend", "local", "--fabric", str(FABRIC)]
        argv += ["--work-dir", str(self.tmp / f"work-{site}")]
        self._spawn(f"agent-{site}", argv, env)

    def signal(self, name: str, sig: signal.Signals) -> None:
        os.killpg(self.procs[name].pid, sig)

    def kill(self, name: str) -> None:
        self.signal(name, signal.SIGKILL)
        self.procs[name].wait(timeout=10)

    def stop(self, name: str) -> None:
        """A clean stop (SIGTERM): a leader gives its lease up."""
        self.signal(name, signal.SIGTERM)
        self.procs[name].wait(timeout=30)

    def close(self) -> None:
        for proc in self.procs.values():  # SIGCONT first: a frozen process cannot stop
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGCONT)
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        # An agent that had to be SIGKILLed leaves its watchdog and its jobs, each in a
        # session of its own: end them too.
        for site in SITES:
            with contextlib.suppress(OSError, ValueError):
                holder = json.loads((self.tmp / f"work-{site}" / "agent.lock").read_text())
                dog = holder.get("watchdog_pid")
                if isinstance(dog, int) and _runs_here(dog, "watchdog"):
                    os.kill(dog, signal.SIGTERM)
        for run in read_runs(self.runs).starts.values():
            for start in run:
                if _runs_here(start.pid, str(self.runs)):
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(start.pid, signal.SIGKILL)

    # -- what the replicas say ------------------------------------------------------------

    def health(self, name: str) -> dict[str, object] | None:
        """``/healthz`` of replica ``name``, or ``None`` where it does not answer in 2 s."""
        proc = self.procs.get(name)
        if proc is None or proc.poll() is not None:
            return None
        try:
            reply = httpx.get(f"{self.urls[name]}/healthz", timeout=2.0)
        except httpx.TransportError:
            return None
        body: dict[str, object] = reply.json()
        return body if reply.status_code == 200 else None

    def leading(self, name: str, *, after_term: int = 0) -> bool:
        health = self.health(name)
        return (
            health is not None
            and health.get("role") == "leader"
            and isinstance(health.get("term"), int)
            and int(str(health["term"])) > after_term
        )

    def leader(self) -> tuple[str, int]:
        """The replica that says it leads, and its term, once exactly one says so."""
        found: list[tuple[str, int]] = []

        def one() -> bool:
            views = {n: self.health(n) for n in self.urls}
            found[:] = [
                (n, int(str(v["term"])))
                for n, v in views.items()
                if v is not None and v.get("role") == "leader"
            ]
            return len(found) == 1

        wait_until("exactly one replica leads", one, 30, self)
        return found[0]

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self) -> str:
        return "".join(f"--- {n} ---\n{self.log(n)[-2500:]}\n" for n in self.procs)


def _runs_here(pid: int, marker: str) -> bool:
    """Whether ``pid`` is alive and its command line holds ``marker`` (not a reused pid)."""
    try:
        return marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def wait_until(what: str, check: Callable[[], bool], timeout: float, plane: Plane) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting until {what}\n{plane.logs()}"
        time.sleep(0.2)


@pytest.fixture
def plane(tmp_path: Path, pg_database: str) -> Iterator[Plane]:
    p = Plane(tmp_path, pg_database)
    try:
        yield p
    finally:
        p.close()


# -- the jobs' own records ----------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    attempt: str
    site: str
    pid: int


@dataclass
class Runs:
    """What the jobs wrote: their starts and ends, per job id."""

    starts: dict[str, list[Start]] = field(default_factory=lambda: defaultdict(list))
    ends: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def running(self) -> set[str]:
        return {job for job in self.starts if len(self.ends.get(job, ())) < len(self.starts[job])}


def read_runs(path: Path) -> Runs:
    runs = Runs()
    for line in path.read_text().splitlines():
        word = line.split()
        if len(word) == 5 and word[0] == "start":
            runs.starts[word[1]].append(Start(attempt=word[2], site=word[3], pid=int(word[4])))
        elif len(word) == 3 and word[0] == "end":
            runs.ends[word[1]].append(word[2])
    return runs


def job_body(runs: Path, *, number: int, team: str, gpu_type: str, seconds: int) -> JobSubmit:
    start = 'echo "start $ONECLUSTER_JOB_ID $ONECLUSTER_ATTEMPT_ID $ONECLUSTER_SITE $$"'
    end = 'echo "end $ONECLUSTER_JOB_ID $ONECLUSTER_ATTEMPT_ID"'
    script = f"{start} >> {runs}; sleep {seconds}; {end} >> {runs}"
    return JobSubmit(
        name=f"drill-{number}",
        team=team,
        gpus=1,
        gpu_types=[gpu_type],
        duration_s=float(seconds),
        command=["sh", "-c", script],
    )


class Stream(threading.Thread):
    """Submits a job every :data:`SUBMIT_EVERY_S`, alternating between a client that tries
    replica a first and one that tries b first; keeps the id of every job answered 201."""

    def __init__(self, plane: Plane, token: str) -> None:
        super().__init__(name="submissions", daemon=True)
        self.plane = plane
        self.token = token
        self.accepted: list[tuple[float, str]] = []  # (time.monotonic() of the 201, id)
        self.refused: Counter[tuple[str, str]] = Counter()  # by phase and error code
        self.phase = "start"  # set by the drill as it goes
        self.latencies: list[float] = []  # seconds each 201 took
        self.crash: BaseException | None = None
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        a, b = self.plane.urls["a"], self.plane.urls["b"]
        # A short timeout: a frozen replica holds a request until then (a POST is then not
        # sent again, its outcome unknown; the job may exist without a 201, which is fine).
        clients = [Client([a, b], self.token, timeout=3.0), Client([b, a], self.token, timeout=3)]
        number = 0
        try:
            while not self._halt.wait(SUBMIT_EVERY_S):
                team, gpu_type = KINDS[number % len(KINDS)]
                body = job_body(
                    self.plane.runs,
                    number=number,
                    team=team,
                    gpu_type=gpu_type,
                    seconds=15 + number % 11,
                )
                sent = time.monotonic()
                try:
                    job = clients[number % 2].submit(body)
                except PlatformError as exc:
                    self.refused[(self.phase, exc.code)] += 1
                else:
                    with self._lock:
                        self.accepted.append((time.monotonic(), job.id))
                        self.latencies.append(time.monotonic() - sent)
                number += 1
        except BaseException as exc:
            self.crash = exc
            raise
        finally:
            for c in clients:
                c.close()

    def since(self, moment: float) -> list[str]:
        """Jobs answered 201 after ``moment`` (``time.monotonic()``)."""
        with self._lock:
            return [job for at, job in self.accepted if at > moment]

    def ids(self) -> list[str]:
        with self._lock:
            return [job for _at, job in self.accepted]

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=30)
        assert not self.is_alive(), "the submissions did not stop"


def placed_since(plane: Plane, stream: Stream, moment: float) -> Callable[[], bool]:
    """A check: some job submitted after ``moment`` has started at its site."""

    def check() -> bool:
        started = read_runs(plane.runs).starts
        return any(job in started for job in stream.since(moment))

    return check


def busy(plane: Plane, what: str) -> None:
    """Wait until :data:`BUSY` jobs run at once (the fault is to hit work in flight)."""
    wait_until(
        f"{BUSY} jobs run before {what}",
        lambda: len(read_runs(plane.runs).running()) >= BUSY,
        60,
        plane,
    )


def all_events(admin: Client) -> list[EventOut]:
    events: list[EventOut] = []
    while batch := admin.events(after=events[-1].id if events else 0, limit=1000):
        events += batch
    return events


def grown_fabric(path: Path) -> Path:
    """The fabric with a fourth site (Seoul: 16 B200, a circuit to Tokyo) and a new pool at
    Singapore (32 A100) — GPU types no job of the drill asks for."""
    fabric = load_fabric(FABRIC)
    seoul = Site(
        name="seoul",
        region="ap-northeast-2",
        jurisdiction="KR",
        pools=(GpuPool(gpu_type="B200", count=16, cost_per_gpu_hour=5.0),),
    )
    sites = tuple(
        replace(s, pools=(*s.pools, GpuPool(gpu_type="A100", count=32)))
        if s.name == "singapore"
        else s
        for s in fabric.sites
    )
    circuit = Circuit(name="tyo-sel", a="tokyo", b="seoul", capacity_gbps=10, rtt_ms=30)
    grown = replace(fabric, sites=(*sites, seoul), circuits=(*fabric.circuits, circuit))
    path.write_text(dump_fabric(grown))
    return path


def all_jobs(admin: Client) -> list[JobOut]:
    return admin.jobs(limit=10_000)


def test_no_job_is_lost_or_run_twice_through_every_failure_of_the_control_plane(
    plane: Plane, tmp_path: Path
) -> None:
    began = time.monotonic()
    plane.start_server("a")  # first alone: it creates the schema, the admin token and leads
    wait_until("a leads", lambda: plane.leading("a"), 30, plane)
    plane.start_server("b")
    admin_token = (tmp_path / "state-a" / "admin.token").read_text().strip()
    admin = Client(list(plane.urls.values()), admin_token)
    stream = Stream(plane, admin_token)
    try:
        for site in SITES:
            token = admin.create_token(TokenCreate(role="agent", site=site)).token
            plane.start_agent(site, token)
        wait_until(
            "every site is up",
            lambda: all(s.status == "up" for s in admin.sites()),
            60,
            plane,
        )
        stream.start()
        wait_until(
            "jobs run at every site",
            lambda: (
                {s.site for r in read_runs(plane.runs).starts.values() for s in r} == set(SITES)
            ),
            60,
            plane,
        )

        # 1. The leader is SIGKILLed: the other takes over and places work.
        busy(plane, "the leader is killed")
        stream.phase = "leader killed"
        first, term = plane.leader()
        second = "b" if first == "a" else "a"
        plane.kill(first)
        killed = time.monotonic()
        wait_until(f"{second} leads", lambda: plane.leading(second, after_term=term), 30, plane)
        wait_until(f"{second} places work", placed_since(plane, stream, killed), 60, plane)

        # 2. The new leader is SIGKILLed and the first started again: it leads and places.
        busy(plane, "the new leader is killed")
        stream.phase = "new leader killed"
        _, term = plane.leader()
        plane.kill(second)
        plane.start_server(first)
        restarted = time.monotonic()
        wait_until(f"{first} leads", lambda: plane.leading(first, after_term=term), 30, plane)
        wait_until(f"{first} places work", placed_since(plane, stream, restarted), 60, plane)
        plane.start_server(second)
        wait_until(f"{second} follows", lambda: plane.health(second) is not None, 30, plane)

        # 3. Both stopped for 60 s, while jobs run; some long enough to span the outage.
        busy(plane, "the outage")
        stream.phase = "outage"
        long_jobs = [
            admin.submit(
                job_body(
                    plane.runs, number=100_000 + i, team=team, gpu_type=gpu, seconds=LONG_JOB_S
                )
            ).id
            for i, (team, gpu) in enumerate(KINDS)
        ]
        wait_until(
            "the long jobs run",
            lambda: set(long_jobs) <= set(read_runs(plane.runs).starts),
            30,
            plane,
        )
        leader, term = plane.leader()
        plane.stop(leader)
        plane.stop("b" if leader == "a" else "a")
        stopped = time.monotonic()
        time.sleep(OUTAGE_S)  # the scenario: no control plane at all for 60 s
        running_through = read_runs(plane.runs).running()
        plane.start_server("a")
        plane.start_server("b")
        back = time.monotonic()
        assert back - stopped >= OUTAGE_S
        wait_until(
            "a replica leads again",
            lambda: any(plane.leading(n, after_term=term) for n in plane.urls),
            30,
            plane,
        )
        assert set(long_jobs) <= running_through, "a long job did not run through the outage"
        wait_until("work is placed again", placed_since(plane, stream, back), 60, plane)

        # 4. The leader frozen past its lease, then woken thinking it still leads.
        busy(plane, "the freeze")
        stream.phase = "freeze"
        frozen, term = plane.leader()
        other = "b" if frozen == "a" else "a"
        plane.signal(frozen, signal.SIGSTOP)
        frozen_at = time.monotonic()
        try:
            wait_until(
                f"{other} takes over", lambda: plane.leading(other, after_term=term), 30, plane
            )
            time.sleep(max(0.0, frozen_at + FREEZE_S - time.monotonic()))  # the scenario
        finally:
            plane.signal(frozen, signal.SIGCONT)
        thawed = time.monotonic()

        def one_leader() -> bool:
            """Both answer; one leads, the other follows, and they agree who, in a new term."""
            views = [plane.health(n) for n in plane.urls]
            if any(v is None for v in views):
                return False
            roles = sorted(str(v["role"]) for v in views if v is not None)
            agreed = {(str(v["leader"]), int(str(v["term"]))) for v in views if v is not None}
            if roles != ["follower", "leader"] or len(agreed) != 1:
                return False
            ((_url, new_term),) = agreed
            return new_term > term

        wait_until("both agree that one of them leads", one_leader, 30, plane)
        wait_until("work is placed after the thaw", placed_since(plane, stream, thawed), 60, plane)

        # 5. A fabric with a new site and a new pool applied while jobs run.
        busy(plane, "the fabric is applied")
        stream.phase = "fabric apply"
        grown = grown_fabric(tmp_path / "grown.yaml")
        cli = [sys.executable, "-m", "onecluster.cli", "--token", admin_token]
        applied = subprocess.run(
            [*cli, "--server", ",".join(plane.urls.values()), "fabric", "apply", str(grown), "-y"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=60,
            check=False,
        )
        assert applied.returncode == 0, applied.stdout + applied.stderr
        applied_at = time.monotonic()
        for name, url in plane.urls.items():
            with Client(url, admin_token) as one:

                def shows_it(replica: Client = one) -> bool:
                    pools = {(s.name, p.gpu_type) for s in replica.sites() for p in s.pools}
                    return {("seoul", "B200"), ("singapore", "A100")} <= pools

                wait_until(f"replica {name} shows the new site and pool", shows_it, 30, plane)
        wait_until(
            "work is placed after the apply", placed_since(plane, stream, applied_at), 60, plane
        )

        # The end: no more submissions; every job ends.
        stream.stop()
        assert stream.crash is None, repr(stream.crash)

        def every_job_ended() -> bool:
            return all(JobState(j.state) in TERMINAL_STATES for j in all_jobs(admin))

        wait_until("every job has ended", every_job_ended, 120, plane)
        jobs = {j.id: j for j in all_jobs(admin)}
        runs = read_runs(plane.runs)
        events = all_events(admin)
        final_term = plane.leader()[1]
        seen_at = {}
        for name, url in plane.urls.items():
            with Client(url, admin_token) as one:
                seen_at[name] = {j.id for j in all_jobs(one)}
    finally:
        if stream.is_alive():
            stream.stop()
        admin.close()

    accepted = stream.ids()
    latencies = sorted(stream.latencies)
    kinds = Counter(e.kind for e in events)
    refused = {f"{phase}: {code}": n for (phase, code), n in stream.refused.items()}
    starts = sum(len(s) for s in runs.starts.values())
    print(
        f"\ndrill: {len(accepted)} submissions answered 201 (median "
        f"{latencies[len(latencies) // 2]:.2f} s, worst {latencies[-1]:.2f} s), refused "
        f"{refused}; {len(jobs)} jobs, {starts} starts; events {dict(kinds)}; "
        f"{time.monotonic() - began:.0f} s in all"
    )
    # Every 201 exists, at each replica.
    for name, seen in seen_at.items():
        missing = [job for job in accepted if job not in seen]
        assert not missing, f"answered 201 but unknown to replica {name}: {missing}"
    # None lost: every job the server knows (201 or not) completed, exit 0, and its run ended.
    unfinished = {
        j.id: (j.state, j.exit_code, j.reason)
        for j in jobs.values()
        if (j.state, j.exit_code) != (JobState.COMPLETED, 0)
    }
    assert not unfinished, f"jobs lost or failed: {unfinished}\n{plane.logs()}"
    # None run twice, by the jobs' own records: exactly one start and one end each.
    twice = {job: starts for job, starts in runs.starts.items() if len(starts) != 1}
    assert not twice, f"jobs started more than once: {twice}\n{plane.logs()}"
    never = sorted(set(jobs) - set(runs.starts))
    assert not never, f"jobs the server says completed but that never started: {never}"
    unknown = sorted(set(runs.starts) - set(jobs))
    assert not unknown, f"jobs that ran but that the server does not know: {unknown}"
    unended = {job: runs.ends.get(job) for job in jobs if len(runs.ends.get(job, ())) != 1}
    assert not unended, f"jobs whose single run did not end once: {unended}"
    assert all(j.attempts == 1 and j.preemptions == 0 for j in jobs.values())
    # Every site ran work, and nothing ran at the new site (it has no agent).
    assert {s.site for r in runs.starts.values() for s in r} == set(SITES)
    # One leader per term: each term elected once, in order, up to the one in force.
    elected = [e.message for e in events if e.kind == "leader_elected"]
    assert [m.endswith(f"(term {t})") for t, m in enumerate(elected, 1)] == [True] * final_term, (
        elected
    )
    # No site was lost and no job stopped or requeued on the way.
    assert not {"site_down", "site_agent_replaced", "stopping", "requeued", "preempting"} & set(
        kinds
    ), dict(kinds)

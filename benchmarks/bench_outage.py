"""Jobs that survive an outage of the whole control plane of 10 s, 60 s and 10 min.

Goal: all of them.  The control plane here is one ``onecluster server`` on SQLite (its
``--state-dir``, the default database in it); the fabric is ``three-site.yaml`` with one
agent per site (local backend, default ``--heartbeat`` 1 s and ``--stop-grace`` 10 s), each
process in a session of its own.  Each case, on a stack of its own (fresh state, ports):

1. submits ``--jobs`` one-GPU jobs (teams llm, vision, speech in turn, on H800, H100 and
   L40S, so that they spread over the three sites) whose command appends
   ``<epoch> <pid> <attempt id>`` to a file of the job's own and then ``exec sleep``\\ s
   until a moment 60 s after the outage's planned end (at least 5 s: a rerun after that
   moment still runs a little), then exits 0;
2. waits until every job runs (the API) and its command has written its line;
3. SIGKILLs the server's process group, watches the jobs' processes (pid and start time in
   ``/proc``) once a second for the outage's length — the outage itself is the only fixed
   wait — and starts the server again on the same state folder and port;
4. waits until every site has synced with the restarted server and looks: which jobs still
   run in their first attempt (the API says running with one attempt, the very process that
   started is alive, the job's file has one line);
5. waits until every job has ended and reads its state, exit code and attempts, its
   ``requeued`` events, and from the job's own file how often it started.  A rerun that
   started while the first process was still seen alive would be a job running twice.

Cases: every outage of ``--outages`` with the default ``--lease`` (the server's, 900 s); an
outage longer than ``--short-lease`` (300 s, the default before decision 193) survives
(about lease - 5 % - stop grace - 4 s: 271 s) also with that lease, the baseline in the same
run; one longer than the default lease survives (841 s) also with ``--long-lease``.  The
cases with such a comparison run concurrently, each on its own stack, after the others.  One
JSON line per case, then a table and a JSON summary::

    .venv/bin/python benchmarks/bench_outage.py                 # about 15 minutes
    .venv/bin/python benchmarks/bench_outage.py --quick         # about 2 minutes

``--quick`` runs a 5 s outage with the default lease and a 15 s outage with ``--lease 10``
(the agents stop their jobs after about 4.5 s: the path where jobs do not survive), both at
once.  Exit status 1 when a case did not end as its lease predicts or a job was lost or ran
twice.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from cli_procs import free_port, spawn_cli
from onecluster.client import Client
from onecluster.model import TERMINAL_STATES
from onecluster.schema import JobOut, JobSubmit, TokenCreate
from onecluster.store import DEFAULT_LEASE_S  # the server's; its cases do not set --lease

ROOT = Path(__file__).resolve().parents[1]
FABRIC = ROOT / "examples" / "fabrics" / "three-site.yaml"
SITES = ("shanghai", "singapore", "tokyo")
#: A team of each site and a GPU type that site has: H800 is Shanghai's only, L40S Tokyo's
#: only, and H100 is Singapore's and Tokyo's (the scheduler puts vision's at home).
TEAMS = (("llm", "H800"), ("vision", "H100"), ("speech", "L40S"))
STOP_GRACE_S = 10.0  # the agents' default; the script does not set it
AGENT_MAX_BACKOFF_S = 4.0  # an agent retries a failed sync at least this often
START_ALLOWANCE_S = 30.0  # the jobs must all run within this long of their submission
MARGIN_S = 60.0  # the jobs run on this long after the outage's planned end
RERUN_FLOOR_S = 5.0  # a rerun after the planned end still sleeps this long


def survivable_s(lease_s: float) -> float:
    """About the longest outage that running jobs survive with ``lease_s``: the agent's end
    of the lease (lease - margin), less the stop grace it starts stopping jobs with, less
    the agents' retry interval (``agent/_lease.py``)."""
    margin = min(max(1.0, 0.05 * lease_s), 0.25 * lease_s)
    usable = lease_s - margin
    return usable - min(STOP_GRACE_S, usable / 2) - AGENT_MAX_BACKOFF_S


@dataclass(frozen=True, slots=True)
class Case:
    outage_s: float
    lease_s: float

    @property
    def label(self) -> str:
        return f"outage {self.outage_s:g} s, lease {self.lease_s:g} s"

    @property
    def expect_survival(self) -> bool:
        return self.outage_s < survivable_s(self.lease_s)


# -- processes -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Proc:
    """A process as ``/proc`` names it: its pid and its start time (clock ticks after boot),
    so that a pid reused by another process is not taken for it."""

    pid: int
    start: int

    @staticmethod
    def read(pid: int) -> Proc | None:
        stat = _stat(pid)
        return None if stat is None else Proc(pid, stat[1])

    def alive(self) -> bool:
        stat = _stat(self.pid)
        return stat is not None and stat[0] != "Z" and stat[1] == self.start


def _stat(pid: int) -> tuple[str, int] | None:
    """``(state, start time)`` of ``pid`` from ``/proc/<pid>/stat``, or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return fields[0], int(fields[19])


class Aborted(RuntimeError):
    """The run is being stopped (Ctrl-C, SIGTERM, another case failed)."""


def _wait_until(
    what: str,
    check: Callable[[], bool],
    timeout: float,
    abort: threading.Event,
    *,
    every: float = 0.5,
    on_each: Callable[[], None] | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if on_each is not None:
            on_each()
        if check():
            return
        if abort.is_set():
            raise Aborted(what)
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting until {what}")
        time.sleep(every)


class Stack:
    """One server and three agents, each a child in a session of its own, logging to files
    under ``tmp``."""

    def __init__(self, name: str, tmp: Path, lease_s: float) -> None:
        self.name = name
        self.tmp = tmp
        self.lease_s = lease_s
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.state = tmp / "state"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.procs[name] = spawn_cli(self.tmp / f"{name}.log", argv, env)

    def start_server(self, abort: threading.Event) -> None:
        argv = ["--state-dir", str(self.state), "server", "--fabric", str(FABRIC)]
        argv += ["--port", str(self.port)]
        if self.lease_s != DEFAULT_LEASE_S:
            argv += ["--lease", f"{self.lease_s:g}"]
        self._spawn("server", argv)
        _wait_until("the server answers", self._healthy, 60, abort, every=0.1)

    def _healthy(self) -> bool:
        proc = self.procs["server"]
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode}):\n{self.log_tail('server')}")
        try:
            return httpx.get(f"{self.url}/healthz", timeout=1.0).status_code == 200
        except httpx.TransportError:
            return False

    def start_agent(self, site: str, token: str) -> None:
        argv = ["--server", self.url, "agent", "--site", site, "--backend", "local"]
        argv += ["--fabric", str(FABRIC), "--work-dir", str(self.tmp / f"work-{site}")]
        self._spawn(f"agent-{site}", argv, {**os.environ, "ONECLUSTER_TOKEN": token})

    def kill_server(self) -> None:
        proc = self.procs["server"]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def log_tail(self, name: str, chars: int = 3000) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def stop(self) -> None:
        """SIGTERM every process group (the agents first: they stop their jobs), SIGKILL what
        is left after 30 s; then SIGKILL any process left that works under ``tmp`` (a job
        whose agent was killed, an agent's watchdog)."""
        order = sorted(self.procs, key=lambda n: not n.startswith("agent"))
        for name in order:
            if self.procs[name].poll() is None:
                _signal_group(self.procs[name].pid, signal.SIGTERM)
        for name in order:
            proc = self.procs[name]
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
        for pid in _working_under(self.tmp):
            _signal_group(pid, signal.SIGKILL)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    """Signal the group ``pid`` leads, else the process ``pid`` alone (if still there)."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _working_under(tmp: Path) -> list[int]:
    """Our processes whose command line or environment names ``tmp`` (jobs get their
    scratch folder under it as ``$ONECLUSTER_SCRATCH``)."""
    needle = str(tmp).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if entry.stat().st_uid != os.getuid():
                continue
            if (
                needle in (entry / "cmdline").read_bytes()
                or needle in (entry / "environ").read_bytes()
            ):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


# -- one case --------------------------------------------------------------------------------


@dataclass
class Watch:
    """The jobs' first processes: when each was last seen alive, and when first seen gone
    (seconds after the kill)."""

    first: dict[str, Proc]
    killed_at: float = 0.0
    last_alive: dict[str, float] = field(default_factory=dict)
    gone_after_kill_s: dict[str, float] = field(default_factory=dict)

    def look(self) -> None:
        now = time.time()
        for job_id, proc in self.first.items():
            if job_id in self.gone_after_kill_s:
                continue
            if proc.alive():
                self.last_alive[job_id] = now
            else:
                self.gone_after_kill_s[job_id] = round(now - self.killed_at, 1)


@dataclass(frozen=True, slots=True)
class Start:
    """One line a job's command wrote: when it started, its pid, its attempt."""

    at: float
    pid: int
    attempt: str


def _starts(path: Path) -> list[Start]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        at, pid, attempt = line.split()
        out.append(Start(float(at), int(pid), attempt))
    return out


@dataclass(frozen=True, slots=True)
class Result:
    """One case.  Times in seconds; ``*_after_kill_s`` from the server's SIGKILL."""

    outage_s: float
    lease_s: float
    survivable_s: float
    expect_survival: bool
    jobs: int
    sites: dict[str, int]
    running_before: int
    server_back_after_kill_s: float
    all_synced_after_kill_s: float
    first_process_gone_during_outage: int
    first_gone_after_kill_s: float | None
    running_first_attempt_after: int
    survived_first_attempt: int
    requeued: int
    completed_exit_0: int
    attempts: list[int]
    starts_per_job: list[int]
    ran_twice_at_once: int
    event_kinds: dict[str, int]

    @property
    def as_expected(self) -> bool:
        everything_done = self.completed_exit_0 == self.jobs and self.ran_twice_at_once == 0
        survived = self.survived_first_attempt == self.jobs
        lost = self.survived_first_attempt == 0 and self.requeued == self.jobs
        return everything_done and (survived if self.expect_survival else lost)


def _job_command(record: Path, end_at: float) -> list[str]:
    script = f'echo "$(date +%s.%N) $$ $ONECLUSTER_ATTEMPT_ID" >> {record}; '
    script += f"left=$(( {int(end_at)} - $(date +%s) )); "
    script += f'[ "$left" -lt {int(RERUN_FLOOR_S)} ] && left={int(RERUN_FLOOR_S)}; '
    script += 'exec sleep "$left"'
    return ["sh", "-c", script]


def _events(admin: Client, after: int) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    while True:
        page = admin.events(after=after, limit=1000)
        out += [(e.kind, e.job_id) for e in page]
        if len(page) < 1000:
            return out
        after = page[-1].id


def run_case(case: Case, tmp: Path, n_jobs: int, abort: threading.Event, say: Say) -> Result:
    stack = Stack(case.label, tmp, case.lease_s)
    say.register(stack)
    stack.start_server(abort)
    token = (stack.state / "admin.token").read_text().strip()
    with Client(stack.url, token) as admin:
        for site in SITES:
            stack.start_agent(site, admin.create_token(TokenCreate(role="agent", site=site)).token)
        _wait_until(
            "every site is up", lambda: all(s.status == "up" for s in admin.sites()), 60, abort
        )
        cursor = max((e.id for e in admin.events(limit=1)), default=0)
        end_at = time.time() + START_ALLOWANCE_S + case.outage_s + MARGIN_S
        records = {}
        ids = []
        for n in range(n_jobs):
            team, gpu_type = TEAMS[n % len(TEAMS)]
            record = tmp / f"starts-{n}"
            job = admin.submit(
                JobSubmit(
                    name=f"outage-{n}",
                    team=team,
                    gpus=1,
                    gpu_types=[gpu_type],
                    duration_s=end_at - time.time(),
                    command=_job_command(record, end_at),
                )
            )
            ids.append(job.id)
            records[job.id] = record

        def all_running() -> bool:
            return all(
                admin.job(j).state == "running" and len(_starts(records[j])) == 1 for j in ids
            )

        _wait_until("every job runs", all_running, START_ALLOWANCE_S, abort)
        before = {j: admin.job(j) for j in ids}
        first = {}
        for j in ids:
            proc = Proc.read(_starts(records[j])[0].pid)
            if proc is None:
                raise RuntimeError(f"job {j}: its process is gone before the outage")
            first[j] = proc
        sites = Counter(p.site for job in before.values() for p in job.parts)
        say.progress(case, f"{len(ids)} jobs run ({dict(sites)}); SIGKILL the server")

    watch = Watch(first)
    outage_began = time.monotonic()
    watch.killed_at = time.time()
    stack.kill_server()
    while (left := outage_began + case.outage_s - time.monotonic()) > 0:
        if abort.is_set():
            raise Aborted(case.label)
        watch.look()
        time.sleep(min(1.0, left))  # the outage itself
    watch.look()
    gone_in_outage = len(watch.gone_after_kill_s)
    say.progress(case, f"start the server again ({gone_in_outage} first processes gone)")
    restarted_at = time.time()
    stack.start_server(abort)
    back_s = time.time() - watch.killed_at

    with Client(stack.url, token) as admin:

        def all_synced() -> bool:
            return all((s.last_heartbeat or 0.0) > restarted_at for s in admin.sites())

        _wait_until("every site synced again", all_synced, 120, abort, on_each=watch.look)
        synced_s = time.time() - watch.killed_at
        after = {j: admin.job(j) for j in ids}
        watch.look()
        running_first = {
            j
            for j in ids
            if after[j].state == "running"
            and after[j].attempts == 1
            and j not in watch.gone_after_kill_s
            and len(_starts(records[j])) == 1
        }
        say.progress(case, f"{len(running_first)} of {len(ids)} run in their first attempt")

        def all_ended() -> bool:
            return all(admin.job(j).state in TERMINAL_STATES for j in ids)

        wait_s = max(end_at - time.time(), 0.0) + 2 * RERUN_FLOOR_S + 180
        _wait_until("every job ended", all_ended, wait_s, abort, every=1.0, on_each=watch.look)
        final: dict[str, JobOut] = {j: admin.job(j) for j in ids}
        events = _events(admin, cursor)

    starts = {j: _starts(records[j]) for j in ids}
    requeued = {job for kind, job in events if kind == "requeued"}
    twice = {
        j
        for j in ids
        if any(s.at < watch.last_alive.get(j, 0.0) for s in starts[j][1:])  # first still alive
    }
    survived = {
        j
        for j in running_first
        if final[j].state == "completed"
        and final[j].exit_code == 0
        and final[j].attempts == 1
        and len(starts[j]) == 1
        and j not in requeued
    }
    gone = [watch.gone_after_kill_s[j] for j in ids if j in watch.gone_after_kill_s]
    gone_in_outage_s = [t for t in gone if t <= case.outage_s + 1.0]
    return Result(
        outage_s=case.outage_s,
        lease_s=case.lease_s,
        survivable_s=round(survivable_s(case.lease_s), 1),
        expect_survival=case.expect_survival,
        jobs=len(ids),
        sites=dict(sorted(sites.items())),
        running_before=sum(before[j].state == "running" for j in ids),
        server_back_after_kill_s=round(back_s, 1),
        all_synced_after_kill_s=round(synced_s, 1),
        first_process_gone_during_outage=gone_in_outage,
        first_gone_after_kill_s=min(gone_in_outage_s) if gone_in_outage_s else None,
        running_first_attempt_after=len(running_first),
        survived_first_attempt=len(survived),
        requeued=len(requeued & set(ids)),
        completed_exit_0=sum(f.state == "completed" and f.exit_code == 0 for f in final.values()),
        attempts=[final[j].attempts for j in ids],
        starts_per_job=[len(starts[j]) for j in ids],
        ran_twice_at_once=len(twice),
        event_kinds=dict(sorted(Counter(kind for kind, _ in events).items())),
    )


# -- the run ---------------------------------------------------------------------------------


class Say:
    """Prints (one line at a time from several threads) and owns the stacks to stop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.stacks: list[Stack] = []
        self.started = time.monotonic()

    def register(self, stack: Stack) -> None:
        with self._lock:
            self.stacks.append(stack)

    def progress(self, case: Case, message: str) -> None:
        with self._lock:
            t = time.monotonic() - self.started
            print(f"[{t:6.0f} s] {case.label}: {message}", file=sys.stderr, flush=True)

    def result(self, result: Result) -> None:
        with self._lock:
            print(json.dumps({**asdict(result), "as_expected": result.as_expected}), flush=True)

    def stop_all(self) -> None:
        for stack in self.stacks:
            stack.stop()


def plan(
    outages: Iterable[float], long_lease_s: float, short_lease_s: float, quick: bool
) -> tuple[list[Case], list[Case]]:
    """The cases to run one after the other, then those to run at once."""
    if quick:
        return [], [Case(5.0, DEFAULT_LEASE_S), Case(15.0, 10.0)]
    short, long = [], []
    for outage in outages:
        cases = [Case(outage, DEFAULT_LEASE_S)]
        if outage >= survivable_s(short_lease_s):
            cases.append(Case(outage, short_lease_s))
        if outage >= survivable_s(DEFAULT_LEASE_S):
            cases.append(Case(outage, long_lease_s))
        (short if len(cases) == 1 else long).extend(cases)
    return short, long


def _run_at_once(
    cases: list[Case], root: Path, n_jobs: int, abort: threading.Event, say: Say
) -> list[Result]:
    results: dict[Case, Result] = {}
    errors: list[BaseException] = []

    def one(i: int, case: Case) -> None:
        try:
            tmp = root / f"concurrent-{i}"
            tmp.mkdir()
            results[case] = run_case(case, tmp, n_jobs, abort, say)
            say.result(results[case])
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            errors.append(exc)
            abort.set()

    threads = [threading.Thread(target=one, args=(i, c), daemon=True) for i, c in enumerate(cases)]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(timeout=1.0)  # a short join lets Ctrl-C through
    if errors:
        raise errors[0]
    return [results[c] for c in cases]


def _table(results: list[Result]) -> str:
    rows = [
        "| outage | lease | jobs running before | survived in first attempt | "
        "stopped + requeued | completed exit 0 | starts per job (jobs' own records) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        starts = ", ".join(f"{n}×{k}" for k, n in sorted(Counter(r.starts_per_job).items()))
        rows.append(
            f"| {r.outage_s:g} s | {r.lease_s:g} s | {r.running_before} | "
            f"{r.survived_first_attempt} | {r.requeued} | {r.completed_exit_0} | {starts} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outages", default="10,60,600", help="seconds, comma-separated")
    parser.add_argument("--long-lease", type=float, default=1800.0)
    parser.add_argument("--short-lease", type=float, default=300.0)
    parser.add_argument("--jobs", type=int, default=6, help="one-GPU jobs per case")
    parser.add_argument("--quick", action="store_true", help="5 s and 15 s (lease 10) at once")
    parser.add_argument("--keep-logs", type=Path, help="copy the processes' logs here")
    args = parser.parse_args()
    outages = [float(x) for x in args.outages.split(",") if x.strip()]
    short, long = plan(outages, args.long_lease, args.short_lease, args.quick)

    def on_sigterm(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    say = Say()
    abort = threading.Event()
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="oc-outage-") as tmpdir:
        root = Path(tmpdir)
        try:
            for i, case in enumerate(short):
                tmp = root / f"sequential-{i}"
                tmp.mkdir()
                results.append(run_case(case, tmp, args.jobs, abort, say))
                say.result(results[-1])
                say.stacks[-1].stop()
            results += _run_at_once(long, root, args.jobs, abort, say)
        finally:
            abort.set()
            say.stop_all()
            if args.keep_logs is not None:
                for log in root.rglob("*.log"):
                    dest = args.keep_logs / log.relative_to(root)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_bytes(log.read_bytes())
    print(_table(results), flush=True)
    summary = {
        "benchmark": "outage",
        "cases": len(results),
        "as_expected": sum(r.as_expected for r in results),
        "goal_all_survive": {
            f"{r.outage_s:g}@{r.lease_s:g}": r.survived_first_attempt == r.jobs for r in results
        },
        "jobs_lost": sum(r.jobs - r.completed_exit_0 for r in results),
        "ran_twice_at_once": sum(r.ran_twice_at_once for r in results),
        "database": "sqlite",
        "cpus": os.cpu_count(),
        "wall_s": round(time.monotonic() - say.started),
    }
    print(json.dumps(summary), flush=True)
    if summary["as_expected"] != len(results):
        sys.exit(1)


if __name__ == "__main__":
    main()

"""``onecluster up``: the three-site fabric on this machine as real processes, a workload
replayed through it with a live view, and a clean stop of everything it started."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from rich.console import Console
from rich.live import Live
from sqlalchemy.engine import make_url

from onecluster.backends import kill_leftovers
from onecluster.client import Client
from onecluster.errors import BackendError, FabricError
from onecluster.fabric import load_fabric
from onecluster.launch import Launcher, start_agent, start_server, wait_server
from onecluster.model import Fabric
from onecluster.schema import TokenCreate
from onecluster.state_dir import ADMIN_TOKEN_FILE, DATABASE_FILE, SERVER_URL_FILE
from onecluster.up._config import UpConfig
from onecluster.up._live import PlainProgress, ViewState, render_summary, render_view
from onecluster.up._replay import replay
from onecluster.up._replicas import (
    REPLICAS_DIR,
    Replica,
    ReplicaWatch,
    plan_replicas,
    publish_replicas,
    replica_admin_token,
)
from onecluster.up._stack import wait_sites_up
from onecluster.up._workload import DemoWorkload, demo_workload

__all__ = ["run_up"]

#: What `up` puts in its state directory (removed before a run unless --keep-state).
_OWN_ENTRIES = (
    "logs",
    "agents",
    REPLICAS_DIR,
    ADMIN_TOKEN_FILE,
    DATABASE_FILE,
    f"{DATABASE_FILE}-wal",
    f"{DATABASE_FILE}-shm",
)


def run_up(config: UpConfig, console: Console) -> None:
    """Bring the fabric up, replay the workload, print the summary, then (unless
    ``config.wait`` is false) keep the API up until Ctrl-C, SIGTERM or SIGHUP.  Every process
    started is stopped before returning — agents first, then the server — and the stop is
    reported.  With ``config.replicas`` above one, the servers are replicas on one PostgreSQL
    database (:mod:`onecluster.up._replicas`): the loss of one is reported and ridden out.

    A stop that the user asks for (Ctrl-C, SIGTERM, SIGHUP) is the normal end of a serving
    ``up``: it returns once everything has stopped.  With ``config.wait`` false the run is
    finite, and one cut short re-raises the :class:`KeyboardInterrupt` after the stop (the
    CLI maps it to its interrupted exit code).  Raises :class:`FabricError`/:class:`TraceError`
    for bad inputs (before anything starts), :class:`BackendError` when a child dies or a
    process does not stop, and :class:`UnavailableError` when the stack does not become ready
    in time.
    """
    fabric = load_fabric(config.fabric_path)
    remote = [f"{s.name} ({s.backend})" for s in fabric.sites if s.backend != "local"]
    if remote:
        msg = (
            f"`up` runs every site on local processes; {', '.join(remote)} of "
            f"{config.fabric_path} need their own cluster"
        )
        raise FabricError(
            msg, hint="start the server, then `onecluster agent` per site (docs/backends.md)"
        )
    workload = demo_workload(
        fabric,
        config.duration_s,
        trace_path=config.trace_path,
        jobs=config.job_count,
        seed=config.seed,
    )
    state = config.state_dir.resolve()
    # the admin token of a database of the user's (--db) stays: it is that database's key
    _prepare_state(state, keep=config.keep_state, keep_token=config.db_url is not None)
    session = _Session(
        config=config,
        console=console,
        fabric=fabric,
        workload=workload,
        state=state,
        replicas=plan_replicas(state, host=config.host, port=config.port, count=config.replicas),
        launcher=Launcher(state / "logs", grace_s=config.stop_grace_s),
    )
    interrupted: KeyboardInterrupt | None = None
    try:
        with _stop_signals_as_interrupt():
            session.run()
    except KeyboardInterrupt as exc:
        interrupted = exc
        console.print("stopping every process, as asked")
    finally:
        _stop(session.launcher, console, state)
    if interrupted is not None and not config.wait:
        raise interrupted


@dataclass(frozen=True, slots=True, kw_only=True)
class _Session:
    """One run of ``up``: what it was given and the processes it owns."""

    config: UpConfig
    console: Console
    fabric: Fabric
    workload: DemoWorkload
    state: Path
    replicas: tuple[Replica, ...]
    launcher: Launcher

    @property
    def urls(self) -> list[str]:
        """Every replica's URL: the clients and agents fail over between them."""
        return [r.url for r in self.replicas]

    def run(self) -> None:
        fabric, console = self.fabric, self.console
        console.print(f"[bold]onecluster up[/]: fabric {fabric.name} ({self.config.fabric_path})")
        console.print(f"workload: {self.workload.source}; gangs scaled ×{self.workload.gpu_factor}")
        self._start_servers()
        with contextlib.ExitStack() as clients:
            token = replica_admin_token(self.state, self.replicas)
            admin = clients.enter_context(Client(self.urls, token))
            watch = ReplicaWatch(
                self.launcher, self.replicas, leader=admin.leader, say=console.print
            )
            watch()  # with replicas: which one leads
            for site in fabric.site_names:
                self._start_agent(site, admin)
            members = {
                t.name: clients.enter_context(
                    Client(
                        self.urls, admin.create_token(TokenCreate(role="member", team=t.name)).token
                    )
                )
                for t in fabric.teams
            }
            wait_sites_up(
                admin, fabric.site_names, self.launcher, timeout_s=self.config.startup_timeout_s
            )
            url = self.urls[0]
            console.print(
                f"NOC dashboard: {url}/ (sign in with the admin token in "
                f"{self.state / ADMIN_TOKEN_FILE})"
            )
            console.print(
                f"all {len(fabric.sites)} sites are up; "
                f"replaying for {self.config.duration_s:.0f} s"
            )
            self._replay(admin, members, watch)
            console.print(f"API:   {url}/api/v1   docs: {url}/docs")
            if len(self.replicas) > 1:
                console.print(f"every replica serves it: {', '.join(self.urls)}")
            console.print(f"admin token: {self.state / ADMIN_TOKEN_FILE}")
            if self.config.wait:
                console.print("the API stays up; press Ctrl-C to stop every process")
                while True:
                    watch()
                    time.sleep(1.0)

    def _start_servers(self) -> None:
        """The first replica alone (it creates the schema and the admin token), then the
        others; each waited for until it answers."""
        if self.config.db_url is not None:
            self.console.print(f"database: {_shown(self.config.db_url)}")
        for replica in self.replicas:
            self._start_server(replica)
        published = publish_replicas(self.state, self.replicas)
        if published is not None:
            self.console.print(
                f"{len(self.replicas)} replicas at {', '.join(self.urls)}; the CLI finds them "
                f"in {published} and fails over between them"
            )

    def _start_server(self, replica: Replica) -> None:
        extra: list[str] = []
        if self.config.db_url is not None:
            extra += ["--db", self.config.db_url]
        if len(self.replicas) > 1:
            extra += ["--advertise-url", replica.url]
        server = start_server(
            self.launcher,
            python=self.config.python,
            state_dir=replica.state_dir,
            fabric=self.config.fabric_path.resolve(),
            host=self.config.host,
            port=replica.port,
            extra=extra,
            name=replica.name,
        )
        self.console.print(
            f"started {replica.name} (pid {server.process.pid}) at {server.url}, "
            f"log {server.process.log_path}"
        )
        wait_server(self.launcher, server, timeout_s=self.config.startup_timeout_s)

    def _start_agent(self, site: str, admin: Client) -> None:
        agent = start_agent(
            self.launcher,
            admin,
            python=self.config.python,
            site=site,
            fabric=self.config.fabric_path.resolve(),
            work_dir=self.state / "agents" / site,
            env=os.environ,
            extra=("--backend", "local"),
        )
        self.console.print(f"started agent of {site} (pid {agent.pid}), log {agent.log_path}")

    def _replay(self, admin: Client, members: dict[str, Client], watch: ReplicaWatch) -> None:
        with self._view() as show:
            result = replay(
                self.workload,
                fabric_name=self.fabric.name,
                duration_s=self.config.duration_s,
                admin=admin,
                members=members,
                show=show,
                check_alive=watch,
            )
        self.console.print()
        self.console.print(render_summary(result.stats, mean_utilization=result.mean_utilization))
        unanswered = (
            f", {result.unanswered} sent without an answer (a replica lost mid-request)"
            if result.unanswered
            else ""
        )
        self.console.print(
            f"replay: {result.submitted} jobs submitted, {result.rejected} refused, "
            f"{result.stats.completed} completed{unanswered}"
        )

    @contextlib.contextmanager
    def _view(self) -> Iterator[Callable[[ViewState], None]]:
        """The live view on a terminal; plain progress lines on a pipe or into a file, where
        a live view would show nothing until it ends."""
        if not self.console.is_terminal:
            yield PlainProgress(lambda line: self.console.print(line, soft_wrap=True))
            return
        with Live(console=self.console, auto_refresh=False, transient=False) as live:
            yield lambda view: live.update(render_view(view), refresh=True)


def _stop(launcher: Launcher, console: Console, state: Path) -> None:
    """Stop every child (agents, then the server) with Ctrl-C, SIGTERM and SIGHUP masked, so
    a second signal cannot cut the clean-up short, and say so.  :class:`BackendError` if a
    process is still alive after it all."""
    previous = _mask_stop_signals()
    try:
        report = launcher.stop_all()
        orphans = _kill_agent_leftovers(state / "agents")
    finally:
        _restore_signals(previous)
    if orphans:
        console.print(f"killed {orphans} jobs left behind by a crashed agent")
    # the URL would point the CLI at a server that is gone; the admin token stays valid
    # for the next run with --keep-state
    (state / SERVER_URL_FILE).unlink(missing_ok=True)
    if report.stopped:
        names = ", ".join(f"{c.name} (pid {c.pid})" for c in report.stopped)
        console.print(f"stopped {len(report.stopped)} processes: {names}")
    if report.survivors:
        msg = f"processes {', '.join(map(str, report.survivors))} did not stop, even on SIGKILL"
        raise BackendError(msg, hint="they may be stuck in the kernel; see `ps -o pid,stat,cmd`")


def _kill_agent_leftovers(agents: Path) -> int:
    """Kill the jobs of agents that crashed (or were SIGKILLed): their jobs run in their own
    sessions, re-parented away from us, but their attempt records still name them."""
    if not agents.is_dir():
        return 0
    return sum(len(kill_leftovers(site)) for site in sorted(agents.iterdir()) if site.is_dir())


def _shown(db_url: str) -> str:
    """``db_url`` without its password, to print."""
    return make_url(db_url).render_as_string(hide_password=True)


def _prepare_state(state: Path, *, keep: bool, keep_token: bool) -> None:
    state.mkdir(parents=True, exist_ok=True)
    if keep:
        return
    for name in _OWN_ENTRIES:
        if keep_token and name == ADMIN_TOKEN_FILE:
            continue
        path = state / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


#: Signals that end ``up`` the way Ctrl-C does (SIGHUP: the terminal running it closed).
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _stop_signals_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM and SIGHUP like Ctrl-C while ``up`` runs, so all stop everything."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in _STOP_SIGNALS}
    try:
        yield
    finally:
        # Ignore (not default) them until ``_stop`` has finished: a second SIGTERM must not
        # kill ``up`` half-way through stopping its children.
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)


def _mask_stop_signals() -> dict[int, object] | None:
    if threading.current_thread() is not threading.main_thread():
        return None
    return {
        sig: signal.signal(sig, signal.SIG_IGN)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    }


def _restore_signals(previous: dict[int, object] | None) -> None:
    if previous is None:
        return
    for sig, handler in previous.items():
        restored = signal.SIG_DFL if sig != signal.SIGINT else handler
        signal.signal(sig, restored)  # type: ignore[arg-type]

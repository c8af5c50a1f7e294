"""``onecluster lab``: a multi-site fabric on one Linux host — one network namespace per site
with its agent inside, joined by emulated circuits, and a server on the host.

:class:`Lab` is the whole verb set; each call reads the lab's state file
(:mod:`onecluster.lab._state`), acts, and writes it back, so the lab outlives the command
that made it.  ``up`` builds step by step and, if any step fails, removes everything it made
before raising.  Every process the lab starts goes through one :class:`Launcher`, and is found
and stopped later by PID, and only if its command line still names the lab's directory.
"""

from __future__ import annotations

import shutil
import signal
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from onecluster.client import Client
from onecluster.errors import (
    BackendError,
    ConflictError,
    NotFoundError,
    PlatformError,
    UnavailableError,
    ValidationError,
)
from onecluster.fabric import load_fabric
from onecluster.lab._build import (
    build_bridge,
    build_site,
    check_host,
    host_veth_ends,
    new_site_netns,
    tear_down,
)
from onecluster.lab._circuits import EmulatorStatus, TunEmulator, start_tun_emulator
from onecluster.lab._flows import FlowSample, run_flow
from onecluster.lab._plan import BRIDGE_IP, CircuitPlan, LabPlan, check_lab_name, plan_lab
from onecluster.lab._state import LabState, ProcessRecord
from onecluster.launch import (
    Launcher,
    admin_token,
    free_port,
    log_tail,
    start_agent,
    start_server,
    wait_server,
)
from onecluster.network import (
    device_with_address,
    in_netns,
    link_exists,
    list_netns,
    netns_pids,
)
from onecluster.process import stop_pids
from onecluster.state_dir import ADMIN_TOKEN_FILE

__all__ = ["DEFAULT_ROOT", "CircuitStatus", "FlowSample", "Lab", "LabStatus", "SiteStatus"]

#: Where labs keep their state: tmpfs, which — like network namespaces — ends at reboot.
DEFAULT_ROOT = Path("/run/onecluster")
_METRICS_PORT = 9464
#: How long the lab's processes get between SIGTERM and SIGKILL.
_STOP_GRACE_S = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteStatus:
    """A site of the lab: its namespace, agent and processes."""

    site: str
    netns: str
    netns_exists: bool
    agent_pid: int | None
    agent_alive: bool
    processes: int
    down: bool
    service_ip: str
    metrics_url: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CircuitStatus:
    """An emulated circuit: ``emulator`` is ``None`` when its emulator is not running."""

    circuit: str
    a: str
    b: str
    rate_bps: float
    one_way_ms: float
    loss: float
    emulator: EmulatorStatus | None
    problem: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LabStatus:
    """The lab as it is now."""

    name: str
    directory: Path
    fabric: str
    scale: float
    server_url: str | None
    server_alive: bool
    admin_token_file: Path
    sites: tuple[SiteStatus, ...]
    circuits: tuple[CircuitStatus, ...]


class Lab:
    """The lab called ``name``, kept in ``root/name`` (see the module docstring).

    ``environ`` is the environment handed to the processes the lab starts (the CLI passes
    its own); ``progress`` receives a line per step of long operations.
    """

    def __init__(
        self,
        name: str = "oclab",
        *,
        root: Path = DEFAULT_ROOT,
        environ: Mapping[str, str] | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        check_lab_name(name)
        self.name = name
        self.dir = root / name
        self._environ = dict(environ or {})
        self._progress = progress or (lambda _line: None)
        # Starts the lab's processes; they outlive this object (their PIDs are in the state).
        self._launcher = Launcher(self.dir / "logs", grace_s=_STOP_GRACE_S, marker=f"{self.dir}/")

    def _reap(self) -> None:
        self._launcher.reap()

    # -- state ------------------------------------------------------------------------------

    def _state(self) -> LabState:
        # Each verb starts as a fresh command would: processes of this object that died
        # before it (a site taken down, an emulator that was killed) are no longer watched.
        self._reap()
        state = LabState.load(self.dir)
        if state is None:
            msg = f"there is no lab {self.name!r} on this host"
            raise NotFoundError(msg, hint="start one with `onecluster lab up --fabric FILE`")
        return state

    def _plan(self, state: LabState) -> LabPlan:
        return plan_lab(
            load_fabric(Path(state.fabric)), name=state.name, scale=state.scale, mtu=state.mtu
        )

    def exists(self) -> bool:
        """Whether this lab has a state file."""
        return (self.dir / "state.json").exists()

    # -- up and down ------------------------------------------------------------------------

    def up(
        self,
        fabric_path: Path,
        *,
        scale: float = 0.05,
        mtu: int = 1500,
        port: int | None = None,
        ready_timeout_s: float = 60.0,
        server_flags: Sequence[str] = (),
    ) -> LabStatus:
        """Build the lab for ``fabric_path`` and wait until every agent syncs and every
        circuit is measured up; ``server_flags`` are added to the server's command line
        (``["--relay-share", "1"]``, say).  :class:`ConflictError` if the lab (or its
        leftovers) exist."""
        check_host()
        fabric = load_fabric(fabric_path)
        plan = plan_lab(fabric, name=self.name, scale=scale, mtu=mtu)
        leftovers = [ns for ns in list_netns() if ns.startswith(f"{self.name}-")]
        leftovers += host_veth_ends(self.name)
        if self.exists() or leftovers or link_exists(plan.bridge):
            msg = f"a lab named {self.name} is already on this host"
            raise ConflictError(msg, hint="`onecluster lab down-all` removes it first")
        holder = device_with_address(BRIDGE_IP)
        if holder is not None:
            msg = f"{BRIDGE_IP}, the lab's management address, is already on device {holder}"
            raise ConflictError(
                msg,
                hint="one lab per host: remove the other (`onecluster lab down-all --name NAME`)",
            )
        shutil.rmtree(self.dir / "logs", ignore_errors=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        copy = self.dir / "fabric.yaml"
        shutil.copyfile(fabric_path, copy)
        state = LabState(name=self.name, fabric=str(copy), scale=scale, mtu=mtu)
        state.save(self.dir)
        try:
            self._build(plan, state, port, server_flags)
            self._wait_ready(plan, state, ready_timeout_s)
        except BaseException:
            self._progress("the lab did not come up; removing what was made")
            try:
                tear_down(
                    self.name, self.dir, LabState.load(self.dir), self._progress, self._launcher
                )
            finally:
                self._reap()
            raise
        return self.status()

    def _build(
        self, plan: LabPlan, state: LabState, port: int | None, server_flags: Sequence[str]
    ) -> None:
        build_bridge(plan)
        state.bridge = True
        state.save(self.dir)
        for site in plan.sites:
            new_site_netns(site)
            state.netns.append(site.netns)
            state.save(self.dir)
            build_site(plan, site)
            self._progress(f"site {site.site}: namespace {site.netns}, address {site.service_ip}")
        for circuit in plan.circuits:
            self._start_circuit(plan, state, circuit)
        self._start_server(state, port, server_flags)
        admin = self._admin(state)
        with admin:
            for site in plan.sites:
                self._start_agent(plan, state, site.site, admin)

    def _start_circuit(self, plan: LabPlan, state: LabState, circuit: CircuitPlan) -> None:
        _, process = start_tun_emulator(plan, circuit, self.dir / "emulators", self._launcher)
        state.emulators[circuit.circuit] = ProcessRecord(pid=process.pid, log=str(process.log_path))
        state.save(self.dir)
        self._progress(
            f"circuit {circuit.circuit}: {circuit.a}⇄{circuit.b}, "
            f"{circuit.one_way_ms * 2:g} ms RTT, "
            f"{circuit.rate_bps / 1e6:g} Mbit/s, loss {circuit.loss:g}"
        )

    def _start_server(self, state: LabState, port: int | None, flags: Sequence[str]) -> None:
        server = start_server(
            self._launcher,
            python=sys.executable,
            state_dir=self.dir / "server",
            fabric=Path(state.fabric),
            host=BRIDGE_IP,
            port=port or free_port(BRIDGE_IP),
            env=self._environ,
            extra=flags,
        )
        state.server = ProcessRecord(pid=server.process.pid, log=str(server.process.log_path))
        state.server_url = server.url
        state.save(self.dir)
        wait_server(self._launcher, server, timeout_s=30.0)
        self._progress(
            f"server at {server.url} (admin token in {server.state_dir / ADMIN_TOKEN_FILE})"
        )

    def _admin(self, state: LabState) -> Client:
        token = admin_token(self.dir / "server")
        return Client(state.server_url or "", token, timeout=10.0)

    def _start_agent(self, plan: LabPlan, state: LabState, site: str, admin: Client) -> None:
        s = plan.site(site)
        links = [f"--link={c.circuit}={c.address_of(site)}" for c in plan.of_site(site)]
        flags = [
            *links, "--service-address", s.service_ip, "--apply-routes",
            "--metrics", f"{s.mgmt_ip}:{_METRICS_PORT}", "--stop-grace", "2",
        ]  # fmt: skip
        process = start_agent(
            self._launcher,
            admin,
            python=sys.executable,
            site=site,
            fabric=Path(state.fabric),
            work_dir=self.dir / "sites" / site,
            env=self._environ,
            extra=flags,
            wrap=lambda argv: in_netns(s.netns, argv),
        )
        state.agents[site] = ProcessRecord(pid=process.pid, log=str(process.log_path))
        state.save(self.dir)
        self._progress(
            f"agent of {site} (pid {process.pid}), metrics http://{s.mgmt_ip}:{_METRICS_PORT}/metrics"
        )

    def _wait_ready(
        self, plan: LabPlan, state: LabState, timeout_s: float, sites: Sequence[str] | None = None
    ) -> None:
        """Until the agents of ``sites`` (default all) sync and their circuits are up."""
        wanted = set(sites or [s.site for s in plan.sites])
        waiting: list[str] = []
        with self._admin(state) as admin:

            def ready() -> bool:
                for site in wanted:
                    record = state.agents.get(site)
                    if record is not None and not self._launcher.owns(record.pid):
                        msg = f"the agent of {site} exited"
                        log = Path(record.log)
                        raise BackendError(msg, hint=f"its log {log} ends with:\n{log_tail(log)}")
                up = {s.name for s in admin.sites() if s.status == "up"}
                circuits = {
                    link.circuit: link.state
                    for link in admin.links()
                    if link.a in wanted or link.b in wanted
                }
                waiting[:] = sorted(wanted - up) + sorted(
                    c for c, v in circuits.items() if v != "up"
                )
                return not waiting

            def failure() -> UnavailableError:
                msg = (
                    f"the lab is not ready after {timeout_s:.0f} s: "
                    f"waiting for {', '.join(waiting)}"
                )
                return UnavailableError(msg, hint=f"see the logs in {self.dir / 'logs'}")

            self._launcher.wait_until(ready, timeout_s=timeout_s, failure=failure)
        self._progress("every agent syncs and every circuit is measured up")

    def down_all(self) -> list[str]:
        """Remove everything the lab made (also after a crash); what was removed."""
        check_host()
        try:
            state = LabState.load(self.dir)
        except ValidationError:
            state = None  # a damaged state file: sweep by name and by directory
        try:
            return tear_down(self.name, self.dir, state, self._progress, self._launcher)
        finally:
            self._reap()

    # -- circuits ---------------------------------------------------------------------------

    def _targets(self, plan: LabPlan, a: str, b: str, circuit: str | None) -> list[CircuitPlan]:
        found = plan.between(a, b)
        if circuit is None:
            return found
        chosen = plan.circuit(circuit)
        if chosen not in found:
            msg = f"circuit {circuit} does not join {a} and {b}"
            raise ValidationError(msg, hint=f"those that do: {', '.join(c.circuit for c in found)}")
        return [chosen]

    def _emulator(self, state: LabState, circuit: CircuitPlan) -> TunEmulator:
        record = state.emulators.get(circuit.circuit)
        if record is None:
            msg = f"circuit {circuit.circuit} has no emulator in this lab"
            raise NotFoundError(msg)
        control = self.dir / "emulators" / f"c{circuit.index}.sock"
        return TunEmulator(circuit.circuit, record.pid, control)

    def cut(self, a: str, b: str, *, circuit: str | None = None) -> list[str]:
        """Cut every circuit between ``a`` and ``b`` (or just ``circuit``); their names."""
        check_host()
        state = self._state()
        targets = self._targets(self._plan(state), a, b, circuit)
        for c in targets:
            self._emulator(state, c).cut()
        return [c.circuit for c in targets]

    def flap(
        self, a: str, b: str, *, period_s: float, down_s: float, circuit: str | None = None
    ) -> list[str]:
        """Make the circuits between ``a`` and ``b`` go down for ``down_s`` every ``period_s``."""
        check_host()
        state = self._state()
        targets = self._targets(self._plan(state), a, b, circuit)
        for c in targets:
            self._emulator(state, c).flap(period_s, down_s)
        return [c.circuit for c in targets]

    def heal(self, a: str, b: str, *, circuit: str | None = None) -> list[str]:
        """End cuts and flaps between ``a`` and ``b``; an emulator that died is started again."""
        check_host()
        state = self._state()
        plan = self._plan(state)
        targets = self._targets(plan, a, b, circuit)
        for c in targets:
            self._heal_one(plan, state, c)
        return [c.circuit for c in targets]

    def _heal_one(self, plan: LabPlan, state: LabState, c: CircuitPlan) -> None:
        emulator = self._emulator(state, c)
        if self._launcher.owns(emulator.pid):
            emulator.heal()
            return
        self._progress(f"the emulator of {c.circuit} had died; starting it again")
        self._start_circuit(plan, state, c)

    # -- sites ------------------------------------------------------------------------------

    def site_down(self, site: str) -> list[str]:
        """Lose ``site`` as a power failure would: cut its circuits, SIGKILL every process in
        its namespace (agent and jobs); the circuits cut."""
        check_host()
        state = self._state()
        plan = self._plan(state)
        s = plan.site(site)
        if site in state.sites_down:
            msg = f"site {site} is already down"
            raise ConflictError(msg, hint=f"`onecluster lab up {site}` brings it back")
        cut = []
        for c in plan.of_site(site):
            emulator = self._emulator(state, c)
            if self._launcher.owns(emulator.pid):
                emulator.cut()
            cut.append(c.circuit)  # healed (or started again, if it had died) by `lab up SITE`
        stop_pids(netns_pids(s.netns), grace_s=0.0, sig=signal.SIGKILL)
        self._reap()
        state.agents.pop(site, None)
        state.sites_down[site] = cut
        state.save(self.dir)
        return cut

    def site_up(self, site: str, *, ready_timeout_s: float = 60.0) -> None:
        """Bring back a site taken down with :meth:`site_down`: heal its circuits, start its
        agent, wait until it syncs and its circuits are up."""
        check_host()
        state = self._state()
        plan = self._plan(state)
        plan.site(site)
        if site not in state.sites_down:
            msg = f"site {site} is not down"
            raise ConflictError(msg)
        for name in state.sites_down[site]:
            self._heal_one(plan, state, plan.circuit(name))
        with self._admin(state) as admin:
            self._start_agent(plan, state, site, admin)
        del state.sites_down[site]
        state.save(self.dir)
        self._wait_ready(plan, state, ready_timeout_s, sites=[site])

    def server_restart(self, *, flags: Sequence[str] = ()) -> None:
        """Kill the lab's server (SIGKILL, as a crash would) and start it again on the same
        address and state directory, with ``flags``; the agents and their jobs are left
        alone (they run on their leases meanwhile)."""
        check_host()
        state = self._state()
        if state.server is None or state.server_url is None:
            msg = "the lab has no server to restart"
            raise ConflictError(msg, hint="`onecluster lab up` builds the lab first")
        if self._launcher.owns(state.server.pid):
            stop_pids([state.server.pid], grace_s=0.0, sig=signal.SIGKILL)
            self._reap()
        port = int(state.server_url.rsplit(":", 1)[1].split("/", 1)[0])
        self._start_server(state, port, flags)

    # -- traffic ----------------------------------------------------------------------------

    def traffic(
        self,
        src: str,
        dst: str,
        *,
        seconds: float,
        proto: Literal["tcp", "udp"] = "tcp",
        pps: float = 500.0,
        interval_s: float = 0.25,
    ) -> Iterator[FlowSample]:
        """A test flow from site ``src`` to ``dst`` over the routes; the receiver's samples."""
        check_host()
        plan = self._plan(self._state())
        if src == dst:
            msg = "a test flow needs two different sites"
            raise ValidationError(msg)
        yield from run_flow(
            plan.site(src),
            plan.site(dst),
            seconds=seconds,
            proto=proto,
            pps=pps,
            interval_s=interval_s,
        )

    # -- status -----------------------------------------------------------------------------

    def status(self) -> LabStatus:
        """Every site and circuit as it is now."""
        state = self._state()
        check_host()
        plan = self._plan(state)
        existing = set(list_netns())
        owns = self._launcher.owns
        sites = []
        for s in plan.sites:
            record = state.agents.get(s.site)
            inside = netns_pids(s.netns) if s.netns in existing else []
            sites.append(
                SiteStatus(
                    site=s.site,
                    netns=s.netns,
                    netns_exists=s.netns in existing,
                    agent_pid=record.pid if record else None,
                    agent_alive=record is not None and owns(record.pid),
                    processes=len(inside),
                    down=s.site in state.sites_down,
                    service_ip=s.service_ip,
                    metrics_url=f"http://{s.mgmt_ip}:{_METRICS_PORT}/metrics",
                )
            )
        circuits = []
        for c in plan.circuits:
            emulator: EmulatorStatus | None = None
            problem = ""
            try:
                emulator = self._emulator(state, c).status()
            except PlatformError as exc:
                problem = exc.message
            circuits.append(
                CircuitStatus(
                    circuit=c.circuit,
                    a=c.a,
                    b=c.b,
                    rate_bps=c.rate_bps,
                    one_way_ms=c.one_way_ms,
                    loss=c.loss,
                    emulator=emulator,
                    problem=problem,
                )
            )
        return LabStatus(
            name=self.name,
            directory=self.dir,
            fabric=state.fabric,
            scale=state.scale,
            server_url=state.server_url,
            server_alive=state.server is not None and owns(state.server.pid),
            admin_token_file=self.dir / "server" / ADMIN_TOKEN_FILE,
            sites=tuple(sites),
            circuits=tuple(circuits),
        )

"""``onecluster lab``: a multi-site fabric on one Linux host — one network namespace per site
with its agent inside, joined by emulated circuits, and a server on the host.

:class:`Lab` is the whole verb set; each call reads the lab's state file
(:mod:`onecluster.lab._state`), acts, and writes it back, so the lab outlives the command
that made it.  ``up`` builds step by step and, if any step fails, removes everything it made
before raising.  Every process the lab starts is found and stopped later by PID, and only if
its command line still names the lab's directory.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
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
from onecluster.lab._build import build_bridge, build_site, check_host, new_site_netns, tear_down
from onecluster.lab._circuits import EmulatorStatus, TunEmulator, start_tun_emulator
from onecluster.lab._flows import FlowSample, run_flow
from onecluster.lab._pids import alive, ours, spawn, stop_pids, tail
from onecluster.lab._plan import BRIDGE_IP, CircuitPlan, LabPlan, check_lab_name, plan_lab
from onecluster.lab._state import LabState, ProcessRecord
from onecluster.network import (
    device_with_address,
    in_netns,
    link_exists,
    list_netns,
    netns_pids,
)
from onecluster.schema import TokenCreate

__all__ = ["DEFAULT_ROOT", "CircuitStatus", "FlowSample", "Lab", "LabStatus", "SiteStatus"]

#: Where labs keep their state: tmpfs, which — like network namespaces — ends at reboot.
DEFAULT_ROOT = Path("/run/onecluster")
_METRICS_PORT = 9464
_ADMIN_TOKEN = "admin.token"  # noqa: S105 (a file name)


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
        # Children started by this object, polled once stopped so none is left a zombie.
        self._children: list[subprocess.Popen[bytes]] = []

    def _reap(self) -> None:
        for child in self._children:
            child.poll()
        self._children = [c for c in self._children if c.returncode is None]

    # -- state ------------------------------------------------------------------------------

    def _state(self) -> LabState:
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
    ) -> LabStatus:
        """Build the lab for ``fabric_path`` and wait until every agent syncs and every
        circuit is measured up.  :class:`ConflictError` if the lab (or its leftovers) exist."""
        check_host()
        fabric = load_fabric(fabric_path)
        plan = plan_lab(fabric, name=self.name, scale=scale, mtu=mtu)
        leftovers = [ns for ns in list_netns() if ns.startswith(f"{self.name}-")]
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
            self._build(plan, state, port)
            self._wait_ready(plan, state, ready_timeout_s)
        except BaseException:
            self._progress("the lab did not come up; removing what was made")
            try:
                tear_down(self.name, self.dir, LabState.load(self.dir), self._progress)
            finally:
                self._reap()
            raise
        return self.status()

    def _build(self, plan: LabPlan, state: LabState, port: int | None) -> None:
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
        self._start_server(plan, state, port)
        admin = self._admin(state)
        with admin:
            for site in plan.sites:
                self._start_agent(plan, state, site.site, admin)

    def _start_circuit(self, plan: LabPlan, state: LabState, circuit: CircuitPlan) -> None:
        emulator, log, process = start_tun_emulator(plan, circuit, self.dir / "emulators")
        self._children.append(process)
        state.emulators[circuit.circuit] = ProcessRecord(pid=emulator.pid, log=str(log))
        state.save(self.dir)
        self._progress(
            f"circuit {circuit.circuit}: {circuit.a}⇄{circuit.b}, "
            f"{circuit.one_way_ms * 2:g} ms RTT, "
            f"{circuit.rate_bps / 1e6:g} Mbit/s, loss {circuit.loss:g}"
        )

    def _start_server(self, plan: LabPlan, state: LabState, port: int | None) -> None:
        chosen = port or _free_port(BRIDGE_IP)
        server_dir = self.dir / "server"
        url = f"http://{BRIDGE_IP}:{chosen}"
        argv = [
            sys.executable, "-m", "onecluster.cli", "--state-dir", str(server_dir), "server",
            "--fabric", state.fabric, "--host", BRIDGE_IP, "--port", str(chosen),
        ]  # fmt: skip
        log = self.dir / "logs" / "server.log"
        process = spawn(argv, log, env=self._environ)
        self._children.append(process)
        state.server = ProcessRecord(pid=process.pid, log=str(log))
        state.server_url = url
        state.save(self.dir)
        deadline = time.monotonic() + 30.0
        with Client(url, timeout=2.0) as client:
            while True:
                if process.poll() is not None:
                    msg = f"the lab's server exited with status {process.returncode}"
                    raise BackendError(msg, hint=f"its log {log} ends with:\n{tail(log)}")
                try:
                    client.health()
                    break
                except UnavailableError:
                    if time.monotonic() > deadline:
                        raise
                time.sleep(0.1)
        (server_dir / "server.url").write_text(url + "\n")
        self._progress(f"server at {url} (admin token in {server_dir / _ADMIN_TOKEN})")

    def _admin(self, state: LabState) -> Client:
        token = (self.dir / "server" / _ADMIN_TOKEN).read_text().strip()
        return Client(state.server_url or "", token, timeout=10.0)

    def _start_agent(self, plan: LabPlan, state: LabState, site: str, admin: Client) -> None:
        s = plan.site(site)
        token = admin.create_token(TokenCreate(role="agent", site=site)).token
        links = [f"--link={c.circuit}={c.address_of(site)}" for c in plan.of_site(site)]
        argv = in_netns(
            s.netns,
            [
                sys.executable, "-m", "onecluster.cli", "--server", state.server_url or "",
                "agent", "--site", site, "--fabric", state.fabric,
                "--work-dir", str(self.dir / "sites" / site),
                *links, "--service-address", s.service_ip, "--apply-routes",
                "--metrics", f"{s.mgmt_ip}:{_METRICS_PORT}", "--stop-grace", "2",
            ],
        )  # fmt: skip
        log = self.dir / "logs" / f"agent-{site}.log"
        process = spawn(argv, log, env={**self._environ, "ONECLUSTER_TOKEN": token})
        self._children.append(process)
        state.agents[site] = ProcessRecord(pid=process.pid, log=str(log))
        state.save(self.dir)
        self._progress(
            f"agent of {site} (pid {process.pid}), metrics http://{s.mgmt_ip}:{_METRICS_PORT}/metrics"
        )

    def _wait_ready(
        self, plan: LabPlan, state: LabState, timeout_s: float, sites: Sequence[str] | None = None
    ) -> None:
        """Until the agents of ``sites`` (default all) sync and their circuits are up."""
        wanted = set(sites or [s.site for s in plan.sites])
        deadline = time.monotonic() + timeout_s
        with self._admin(state) as admin:
            while True:
                for site in wanted:
                    record = state.agents.get(site)
                    if record is not None and not alive(record.pid):
                        msg = f"the agent of {site} exited"
                        raise BackendError(
                            msg, hint=f"its log {record.log} ends with:\n{tail(Path(record.log))}"
                        )
                up = {s.name for s in admin.sites() if s.status == "up"}
                circuits = {
                    link.circuit: link.state
                    for link in admin.links()
                    if link.a in wanted or link.b in wanted
                }
                waiting = sorted(wanted - up) + sorted(c for c, v in circuits.items() if v != "up")
                if not waiting:
                    self._progress("every agent syncs and every circuit is measured up")
                    return
                if time.monotonic() > deadline:
                    msg = (
                        f"the lab is not ready after {timeout_s:.0f} s: "
                        f"waiting for {', '.join(waiting)}"
                    )
                    raise UnavailableError(msg, hint=f"see the logs in {self.dir / 'logs'}")
                time.sleep(0.2)

    def down_all(self) -> list[str]:
        """Remove everything the lab made (also after a crash); what was removed."""
        check_host()
        try:
            state = LabState.load(self.dir)
        except ValidationError:
            state = None  # a damaged state file: sweep by name and by directory
        try:
            return tear_down(self.name, self.dir, state, self._progress)
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
        if ours(emulator.pid, f"{self.dir}/"):
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
            if ours(emulator.pid, f"{self.dir}/"):
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
        marker = f"{self.dir}/"
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
                    agent_alive=record is not None and ours(record.pid, marker),
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
            server_alive=state.server is not None and ours(state.server.pid, marker),
            admin_token_file=self.dir / "server" / _ADMIN_TOKEN,
            sites=tuple(sites),
            circuits=tuple(circuits),
        )


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port

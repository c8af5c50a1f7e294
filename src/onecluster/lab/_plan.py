"""The lab's layout (pure): which namespace, device, address and emulated circuit each part of
a fabric becomes on this host.

- one network namespace ``<name>-<site>`` per site;
- a management bridge ``<name>-mgmt`` (10.210.0.1/24) in the host's namespace, joined by a
  veth to every site (10.210.0.10+i): the control plane (server ⇄ agents) rides it, never the
  emulated circuits, as an out-of-band management network would;
- each site's *service address* 10.211.0.(1+i)/32 on its loopback: what other sites reach it
  at, routed over the circuits by the agent;
- circuit k: a point-to-point pair 10.212.k.1 (end a) ⇄ 10.212.k.2 (end b) over a TUN device
  in each end's namespace, carried by that circuit's link emulator.

Rates are the fabric's capacity × ``scale`` (a 2-core host cannot carry several Gbit/s of
emulated traffic); delay is half the RTT each way; ``loss`` applies to each direction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from onecluster.errors import ValidationError
from onecluster.model import Fabric

__all__ = ["BRIDGE_IP", "CircuitPlan", "LabPlan", "SitePlan", "check_lab_name", "plan_lab"]

#: The host's address on the management bridge (the lab's server listens there).
BRIDGE_IP = "10.210.0.1"
_NAME = re.compile(r"[a-z][a-z0-9]{0,7}")
_DEVICE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,14}$")
_MIN_RATE_BPS = 1e6
_MAX_SITES, _MAX_CIRCUITS = 200, 250


@dataclass(frozen=True, slots=True, kw_only=True)
class SitePlan:
    """A site's namespace and addresses."""

    site: str
    index: int
    netns: str
    service_ip: str
    mgmt_ip: str
    #: The veth end on the host's side (on the bridge) and in the namespace.
    mgmt_host_dev: str
    mgmt_dev: str = "mgmt"


@dataclass(frozen=True, slots=True, kw_only=True)
class CircuitPlan:
    """An emulated circuit: its two TUN ends and what the emulator and ``tbf`` apply."""

    circuit: str
    index: int
    a: str
    b: str
    device: str
    a_ip: str
    b_ip: str
    one_way_ms: float
    loss: float
    rate_bps: float
    burst_bytes: int
    limit_bytes: int
    mtu: int

    def address_of(self, site: str) -> str:
        """The address of ``site``'s end."""
        return self.a_ip if site == self.a else self.b_ip

    def peer_of(self, site: str) -> str:
        """The address of the far end from ``site``."""
        return self.b_ip if site == self.a else self.a_ip


@dataclass(frozen=True, slots=True, kw_only=True)
class LabPlan:
    """Every site and circuit of the lab called ``name``."""

    name: str
    scale: float
    mtu: int
    bridge: str
    sites: tuple[SitePlan, ...]
    circuits: tuple[CircuitPlan, ...]

    def site(self, name: str) -> SitePlan:
        """The site ``name``; :class:`ValidationError` if the fabric has none."""
        for s in self.sites:
            if s.site == name:
                return s
        msg = f"the lab has no site {name!r}"
        raise ValidationError(msg, hint=f"its sites: {', '.join(s.site for s in self.sites)}")

    def circuit(self, name: str) -> CircuitPlan:
        """The circuit ``name``; :class:`ValidationError` if the fabric has none."""
        for c in self.circuits:
            if c.circuit == name:
                return c
        msg = f"the lab has no circuit {name!r}"
        raise ValidationError(
            msg, hint=f"its circuits: {', '.join(c.circuit for c in self.circuits)}"
        )

    def between(self, a: str, b: str) -> list[CircuitPlan]:
        """Every circuit joining sites ``a`` and ``b``; :class:`ValidationError` if none."""
        self.site(a)
        self.site(b)
        found = [c for c in self.circuits if {c.a, c.b} == {a, b}]
        if not found:
            msg = f"no circuit joins {a} and {b}"
            raise ValidationError(msg)
        return found

    def of_site(self, site: str) -> list[CircuitPlan]:
        """Every circuit with an end at ``site``."""
        self.site(site)
        return [c for c in self.circuits if site in (c.a, c.b)]


def check_lab_name(name: str) -> None:
    """:class:`ValidationError` unless ``name`` is a lab name (it becomes a directory name,
    a namespace prefix and part of device names, so nothing but ``[a-z][a-z0-9]{0,7}``)."""
    if not _NAME.fullmatch(name):
        msg = f"lab name {name!r} must be 1-8 lower-case letters and digits, starting with a letter"
        raise ValidationError(msg, hint="device names are at most 15 characters")


def plan_lab(
    fabric: Fabric, *, name: str = "oclab", scale: float = 0.05, mtu: int = 1500
) -> LabPlan:
    """The layout of ``fabric`` as lab ``name``; :class:`ValidationError` for a lab this host
    cannot build (bad name, too many sites or circuits, a scaled rate below 1 Mbit/s)."""
    check_lab_name(name)
    if not 0 < scale <= 1:
        msg = f"scale {scale} must be in (0, 1]: the fraction of each circuit's capacity to emulate"
        raise ValidationError(msg)
    if not 576 <= mtu <= 9000:
        msg = f"MTU {mtu} must be between 576 and 9000"
        raise ValidationError(msg)
    if len(fabric.sites) > _MAX_SITES or len(fabric.circuits) > _MAX_CIRCUITS:
        msg = f"the lab holds at most {_MAX_SITES} sites and {_MAX_CIRCUITS} circuits"
        raise ValidationError(msg)
    sites = tuple(
        SitePlan(
            site=s.name,
            index=i,
            netns=f"{name}-{s.name}",
            service_ip=f"10.211.0.{i + 1}",
            mgmt_ip=f"10.210.0.{i + 10}",
            mgmt_host_dev=f"{name}-m{i}",
        )
        for i, s in enumerate(fabric.sites)
    )
    circuits = []
    for k, c in enumerate(fabric.circuits):
        rate = c.total_gbps * 1e9 * scale
        if rate < _MIN_RATE_BPS:
            msg = (
                f"at scale {scale} circuit {c.name} would carry {rate / 1e3:.0f} kbit/s; "
                "the lab needs at least 1 Mbit/s per circuit"
            )
            raise ValidationError(msg, hint="raise --scale")
        rate_bytes = rate / 8
        burst = max(int(rate_bytes * 0.004), 4 * mtu, 16384)
        circuits.append(
            CircuitPlan(
                circuit=c.name,
                index=k,
                a=c.a,
                b=c.b,
                device=c.name if _DEVICE.match(c.name) else f"c{k}",
                a_ip=f"10.212.{k}.1",
                b_ip=f"10.212.{k}.2",
                one_way_ms=c.rtt_ms / 2,
                loss=c.loss,
                rate_bps=rate,
                burst_bytes=burst,
                # a queue of one bandwidth-delay product (at least 64 KiB), as at a router
                limit_bytes=max(int(rate_bytes * c.rtt_ms / 1000), 65536) + burst,
                mtu=mtu,
            )
        )
    return LabPlan(
        name=name,
        scale=scale,
        mtu=mtu,
        bridge=f"{name}-mgmt",
        sites=sites,
        circuits=tuple(circuits),
    )

"""Thin wrappers over ``ip``, ``tc`` and ``sysctl``; ``netns=None`` means this process's own
network namespace.  Machine-readable output (``ip -json``) is parsed, never human text."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from onecluster.errors import BackendError

__all__ = [
    "NETNS_DIR",
    "add_address",
    "add_bridge",
    "add_veth",
    "delete_link",
    "delete_netns",
    "device_with_address",
    "in_netns",
    "link_exists",
    "list_netns",
    "netns_path",
    "netns_pids",
    "new_netns",
    "set_link",
    "set_sysctl",
    "set_tbf",
    "show_routes",
]

#: Where ``ip netns`` keeps its named namespaces.
NETNS_DIR = Path("/run/netns")
_TIMEOUT_S = 30.0


def run(argv: Sequence[str], *, what: str, stdin: str | None = None) -> str:
    """Run ``argv``; its stdout, or :class:`BackendError` saying what could not be done."""
    try:
        done = subprocess.run(
            list(argv),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError as exc:
        msg = f"cannot {what}: {argv[0]} is not installed"
        raise BackendError(msg, hint="install iproute2 (and util-linux for nsenter)") from exc
    except subprocess.TimeoutExpired as exc:
        msg = f"cannot {what}: `{' '.join(argv)}` did not finish within {_TIMEOUT_S:.0f} s"
        raise BackendError(msg) from exc
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
        msg = f"cannot {what}: `{' '.join(argv)}` said: {said}"
        raise BackendError(msg)
    return done.stdout


def _ip(netns: str | None) -> list[str]:
    return ["ip", "-n", netns] if netns else ["ip"]


def netns_path(name: str) -> Path:
    """The file of the named namespace (what ``nsenter --net=`` and ``setns`` take)."""
    return NETNS_DIR / name


def in_netns(netns: str, argv: Sequence[str]) -> list[str]:
    """``argv`` run inside ``netns`` (``nsenter``, which keeps this process's mounts and
    ``/sys``, unlike ``ip netns exec``)."""
    return ["nsenter", f"--net={netns_path(netns)}", "--", *argv]


def new_netns(name: str) -> None:
    """Create the namespace ``name`` with its loopback up."""
    run(["ip", "netns", "add", name], what=f"create network namespace {name}")
    set_link("lo", name, up=True)


def delete_netns(name: str) -> None:
    """Delete the namespace ``name`` (its devices go with it)."""
    run(["ip", "netns", "delete", name], what=f"delete network namespace {name}")


def list_netns() -> list[str]:
    """The names of every named network namespace."""
    text = run(["ip", "-json", "netns", "list"], what="list network namespaces").strip()
    if not text:
        return []
    entries: list[dict[str, Any]] = json.loads(text)
    return [str(e["name"]) for e in entries]


def netns_pids(name: str) -> list[int]:
    """PIDs of the processes inside ``name``."""
    text = run(["ip", "netns", "pids", name], what=f"list the processes in {name}")
    return [int(word) for word in text.split()]


def add_bridge(name: str, netns: str | None = None) -> None:
    """Create a bridge device ``name``."""
    run([*_ip(netns), "link", "add", name, "type", "bridge"], what=f"create bridge {name}")


def add_veth(name: str, peer: str, *, peer_netns: str | None = None) -> None:
    """A veth pair ``name`` (here) ⇄ ``peer`` (moved into ``peer_netns`` when given)."""
    argv = ["ip", "link", "add", name, "type", "veth", "peer", "name", peer]
    if peer_netns:
        argv += ["netns", peer_netns]
    run(argv, what=f"create veth pair {name}/{peer}")


def delete_link(name: str, netns: str | None = None) -> None:
    """Delete device ``name``."""
    run([*_ip(netns), "link", "delete", name], what=f"delete device {name}")


def link_exists(name: str, netns: str | None = None) -> bool:
    """Whether device ``name`` exists."""
    try:
        run([*_ip(netns), "-json", "link", "show", "dev", name], what=f"look up device {name}")
    except BackendError:
        return False
    return True


def set_link(
    name: str,
    netns: str | None = None,
    *,
    up: bool | None = None,
    mtu: int | None = None,
    txqueuelen: int | None = None,
    master: str | None = None,
) -> None:
    """Change device ``name``: state, MTU, transmit queue length, bridge."""
    argv = [*_ip(netns), "link", "set", "dev", name]
    if mtu is not None:
        argv += ["mtu", str(mtu)]
    if txqueuelen is not None:
        argv += ["txqueuelen", str(txqueuelen)]
    if master is not None:
        argv += ["master", master]
    if up is not None:
        argv.append("up" if up else "down")
    run(argv, what=f"configure device {name}")


def add_address(
    name: str, address: str, netns: str | None = None, *, peer: str | None = None
) -> None:
    """Add ``address`` (``a.b.c.d/len``, or a point-to-point address with ``peer``) to ``name``."""
    argv = [*_ip(netns), "address", "add", address]
    if peer is not None:
        argv += ["peer", peer]
    run([*argv, "dev", name], what=f"add address {address} to {name}")


def device_with_address(address: str, netns: str | None = None) -> str | None:
    """The device that holds ``address`` (IPv4), or ``None``."""
    text = run([*_ip(netns), "-json", "-4", "address", "show"], what="list addresses").strip()
    for device in json.loads(text) if text else []:
        for info in device.get("addr_info", []):
            if info.get("local") == address:
                return str(device.get("ifname"))
    return None


def show_routes(netns: str | None = None) -> list[dict[str, Any]]:
    """The main routing table (``ip -json route show``)."""
    text = run([*_ip(netns), "-json", "route", "show"], what="read the routing table").strip()
    routes: list[dict[str, Any]] = json.loads(text) if text else []
    return routes


def set_sysctl(netns: str, settings: dict[str, str]) -> None:
    """Set kernel parameters inside ``netns`` (per-namespace ones: forwarding, TCP buffers)."""
    argv = in_netns(netns, ["sysctl", "-q", "-w", *(f"{k}={v}" for k, v in settings.items())])
    run(argv, what=f"set kernel parameters in {netns}")


def set_tbf(
    name: str, netns: str | None, *, rate_bps: float, burst_bytes: int, limit_bytes: int
) -> None:
    """Rate-limit what leaves ``name`` with a token bucket (``tbf``): a real bottleneck queue
    of ``limit_bytes``; packets beyond it are dropped, as at a full router port."""
    run(
        [
            "tc",
            *(["-n", netns] if netns else []),
            "qdisc",
            "replace",
            "dev",
            name,
            "root",
            "tbf",
            "rate",
            f"{int(rate_bps)}bit",
            "burst",
            str(burst_bytes),
            "limit",
            str(limit_bytes),
        ],
        what=f"limit the rate of {name}",
    )

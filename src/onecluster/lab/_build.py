"""Building and removing the lab's network: the management bridge, one namespace per site
(with its veth to the bridge, its service address and the kernel settings a relay site and
long fat circuits need), and tearing all of it down again."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

from onecluster.errors import BackendError, ForbiddenError, PlatformError
from onecluster.lab._plan import BRIDGE_IP, LabPlan, SitePlan
from onecluster.lab._state import LabState
from onecluster.launch import Launcher
from onecluster.network import (
    add_address,
    add_bridge,
    add_veth,
    delete_link,
    delete_netns,
    link_exists,
    list_netns,
    netns_pids,
    new_netns,
    set_link,
    set_sysctl,
)
from onecluster.process import stop_pids

__all__ = ["build_bridge", "build_site", "check_host", "host_veth_ends", "tear_down"]

#: Kernel settings of every site's namespace: forward for relayed routes, no reverse-path
#: filter (a relayed reply arrives on another device than its request left by), and TCP
#: buffers that fill a long fat circuit (≥ 2 × BDP; the default 4 MiB caps 68 ms at ~490 Mbit/s).
SITE_SYSCTLS = {
    "net.ipv4.ip_forward": "1",
    "net.ipv4.conf.all.rp_filter": "0",
    "net.ipv4.conf.default.rp_filter": "0",
    "net.ipv4.tcp_rmem": "4096 131072 67108864",
    "net.ipv4.tcp_wmem": "4096 65536 67108864",
}


#: Where the host's own devices are listed.
_HOST_DEVICES = Path("/sys/class/net")

#: What a lab writes into its directory (besides ``logs/``), and all that teardown removes.
_LAB_ENTRIES = ("state.json", "state.json.tmp", "fabric.yaml", "server", "emulators", "sites")


def check_host() -> None:
    """:class:`ForbiddenError` unless root; :class:`BackendError` if a tool is missing."""
    if os.geteuid() != 0:
        msg = (
            "onecluster lab needs root: it creates network namespaces, TUN devices and rate limits"
        )
        raise ForbiddenError(msg, hint="run it as root (e.g. with sudo)")
    missing = [tool for tool in ("ip", "tc", "nsenter", "sysctl") if shutil.which(tool) is None]
    if missing:
        msg = f"onecluster lab needs {', '.join(missing)}, which this host does not have"
        raise BackendError(msg, hint="install iproute2, util-linux and procps")
    if not Path("/dev/net/tun").exists():
        msg = "onecluster lab needs /dev/net/tun for its link emulators"
        raise BackendError(msg, hint="load the tun module (modprobe tun)")


def build_bridge(plan: LabPlan) -> None:
    """The management bridge with the host's address on it."""
    add_bridge(plan.bridge)
    add_address(plan.bridge, f"{BRIDGE_IP}/24")
    set_link(plan.bridge, up=True)


def build_site(plan: LabPlan, site: SitePlan) -> None:
    """The site's namespace (already created): kernel settings, management veth, service
    address."""
    set_sysctl(site.netns, SITE_SYSCTLS)
    add_veth(site.mgmt_host_dev, site.mgmt_dev, peer_netns=site.netns)
    set_link(site.mgmt_host_dev, master=plan.bridge, up=True)
    add_address(site.mgmt_dev, f"{site.mgmt_ip}/24", site.netns)
    set_link(site.mgmt_dev, site.netns, up=True)
    add_address("lo", f"{site.service_ip}/32", site.netns)


def new_site_netns(site: SitePlan) -> None:
    """Create the site's namespace."""
    new_netns(site.netns)


def tear_down(
    name: str,
    directory: Path,
    state: LabState | None,
    progress: Callable[[str], None],
    launcher: Launcher,
) -> list[str]:
    """Remove every process, namespace and device of lab ``name`` and its directory (but for
    its ``logs``).

    Works from the state file when there is one, and also sweeps what a crashed ``lab up``
    may have left (namespaces named ``<name>-…``, the bridge, processes whose command line
    names the lab's directory: ``launcher`` :meth:`~Launcher.owns` them).  Every step is
    attempted even when one fails; the failures are raised together at the end as one
    :class:`BackendError`.
    """
    removed: list[str] = []
    failures: list[str] = []

    def attempt(what: str, work: Callable[[], None]) -> None:
        try:
            work()
        except PlatformError as exc:
            failures.append(f"{what}: {exc.message}")
        else:
            removed.append(what)
            progress(f"removed {what}")

    prefix = f"{name}-"
    netns = set(state.netns if state else [])
    with contextlib.suppress(PlatformError):
        netns |= {ns for ns in list_netns() if ns.startswith(prefix)}
    if state is not None:
        agents, _ = launcher.stop_owned([r.pid for r in state.agents.values()], grace_s=5.0)
        if agents:
            removed.append(f"{len(agents)} agents")
    for ns in sorted(netns):
        with contextlib.suppress(PlatformError):
            inside = netns_pids(ns)
            if inside:
                stop_pids(inside, grace_s=0.0, sig=signal.SIGKILL)
                removed.append(f"{len(inside)} processes in {ns}")
    rest = [r.pid for r in (state.emulators.values() if state else [])]
    if state is not None and state.server is not None:
        rest.append(state.server.pid)
    rest, _ = launcher.stop_owned([*rest, *launcher.own_processes()], grace_s=5.0)
    if rest:
        removed.append(f"{len(rest)} emulator and server processes")
    with contextlib.suppress(PlatformError):
        netns &= set(list_netns())  # already gone is fine
    for ns in sorted(netns):
        attempt(f"namespace {ns}", _deleter(ns))
    # A deleted namespace lives on, nameless, while anything still holds it — a TCP
    # connection of a killed process that keeps retransmitting into the void, for minutes —
    # and the host end of its management veth with it, which would stop the next `lab up`.
    for device in host_veth_ends(name):
        attempt(f"device {device}", _veth_deleter(device))
    bridge = f"{name}-mgmt"
    if link_exists(bridge):
        attempt(f"bridge {bridge}", lambda: delete_link(bridge))
    survivors = launcher.own_processes()
    if survivors:
        failures.append(f"processes {survivors} did not stop")
    else:
        # Only what the lab writes goes; the logs stay, to say what happened (`lab up`
        # clears them).  Nothing else in the directory is touched.
        for written in _LAB_ENTRIES:
            entry = directory / written
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            elif entry.exists() or entry.is_symlink():
                entry.unlink()
    if failures:
        msg = "the lab was not removed completely: " + "; ".join(failures)
        raise BackendError(msg, hint="run `onecluster lab down-all` again")
    return removed


def _deleter(netns: str) -> Callable[[], None]:
    return lambda: delete_netns(netns)


def host_veth_ends(name: str) -> list[str]:
    """The host ends of lab ``name``'s management veths (``<name>-m<i>``) that exist."""
    pattern = re.compile(rf"{re.escape(name)}-m[0-9]+")
    try:
        return sorted(p.name for p in _HOST_DEVICES.iterdir() if pattern.fullmatch(p.name))
    except OSError:
        return []


def _veth_deleter(device: str) -> Callable[[], None]:
    def delete() -> None:
        try:
            delete_link(device)  # its other end goes with it
        except BackendError:
            if link_exists(device):  # (not when its namespace took it meanwhile)
                raise

    return delete

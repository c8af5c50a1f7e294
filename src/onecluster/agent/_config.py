"""The agent's typed configuration, built once by the CLI and passed down."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from onecluster.client import parse_servers
from onecluster.errors import NotFoundError, ValidationError
from onecluster.fabric import load_fabric
from onecluster.logs import LogFormat
from onecluster.model import MAX_HEARTBEAT_S
from onecluster.telemetry import DEFAULT_PROBE_PORT

__all__ = ["AgentConfig"]

_BACKENDS = ("local", "slurm", "kubernetes")


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    """Everything ``onecluster agent`` needs.

    The site's GPU pools come either from ``pools`` (``{"H100": 384}``) or from the site's
    entry in the fabric file at ``fabric_path`` (exactly one of the two).  ``work_dir`` holds
    the attempts' working directories and logs (default ``~/.onecluster/agent/<site>``).
    ``stop_grace_s`` is the grace given to attempts the agent stops on its own (when the server
    no longer lists them, or when the agent shuts down).

    Links: ``links`` maps each circuit the agent probes to the site's own address on it (none:
    no probes); ``service_address`` is the address other sites reach this one at;
    ``slurm_conf`` is the ``slurm.conf`` of the site's cluster (``backend="slurm"``).
    ``probe_port`` is the UDP port of its probe sockets (0: any free one);
    ``apply_routes`` programs the kernel's routes to the other sites from the server's route
    table; ``metrics_address`` (``host:port``) serves the Prometheus ``/metrics`` of the
    probes and the data plane.

    ``server_url`` is the server's base URL, or those of several replicas of one control plane
    separated by commas, tried in turn (:class:`~onecluster.client.ServerList`); it is kept
    normalised (no spaces, no trailing ``/``), and :attr:`server_urls` lists them.

    Data: ``data_dir`` holds received datasets and the chunk index (default
    ``<work_dir>/data``); the data endpoint listens on ``data_port`` (0: any free one) and is
    announced at ``data_address`` (default: the service address, else this host's address
    toward the server).
    Construction raises :class:`ValidationError` for values that cannot work.
    """

    site: str
    server_url: str
    token: str
    backend: str | None = None
    pools: Mapping[str, int] | None = None
    fabric_path: Path | None = None
    work_dir: Path | None = None
    heartbeat_interval_s: float = 1.0
    max_backoff_s: float = 4.0
    stop_grace_s: float = 10.0
    log_chunk_bytes: int = 65536
    request_timeout_s: float = 5.0
    links: Mapping[str, str] = field(default_factory=dict)
    service_address: str | None = None
    probe_interval_s: float = 0.1
    probe_port: int = DEFAULT_PROBE_PORT
    apply_routes: bool = False
    metrics_address: str | None = None
    data_dir: Path | None = None
    data_port: int = 0
    data_address: str | None = None
    #: The key of an export's keyed pseudonyms at this site (never leaves it); ``None``: this
    #: site cannot be an export's source.
    deid_key: bytes | None = field(default=None, repr=False)
    slurm_conf: Path | None = None
    kubeconfig: Path | None = None
    kube_context: str | None = None
    kube_namespace: str = "default"
    kube_image: str = "python:3.11-slim"
    kueue_queue: str | None = None
    #: How the agent's watchdog writes its log (the agent's own is set up by its caller).
    log_format: LogFormat = LogFormat.TEXT

    def __post_init__(self) -> None:
        if not self.site:
            msg = "the agent needs --site: the fabric name of the site it runs"
            raise ValidationError(msg)
        urls = parse_servers(self.server_url, source="the agent's server URL")
        object.__setattr__(self, "server_url", ",".join(urls))  # frozen: normalised once
        if self.backend is not None and self.backend not in _BACKENDS:
            msg = (
                f"backend {self.backend!r} is not available in this agent; "
                f"use one of {', '.join(_BACKENDS)}"
            )
            raise ValidationError(msg)
        if (self.pools is None) == (self.fabric_path is None):
            msg = "give the agent its GPU pools either directly or through a fabric file, not both"
            raise ValidationError(msg, hint="e.g. --fabric examples/fabrics/demo.yaml")
        for what, value in (
            ("the heartbeat interval", self.heartbeat_interval_s),
            ("the longest retry backoff", self.max_backoff_s),
            ("the request timeout", self.request_timeout_s),
        ):
            if not value > 0:
                msg = f"{what} must be greater than 0 seconds (got {value})"
                raise ValidationError(msg)
        if self.heartbeat_interval_s > MAX_HEARTBEAT_S:
            msg = (
                f"the heartbeat interval must be at most {MAX_HEARTBEAT_S:g} s "
                f"(got {self.heartbeat_interval_s:g}): the server gives a site silent for 30 s "
                "no new work"
            )
            raise ValidationError(msg, hint="the default, 1 s, suits every site")
        if self.stop_grace_s < 0:
            msg = f"the stop grace period must not be negative (got {self.stop_grace_s})"
            raise ValidationError(msg)
        if self.log_chunk_bytes < 1024:
            msg = f"log chunks must allow at least 1024 bytes (got {self.log_chunk_bytes})"
            raise ValidationError(msg)
        self._check_links()

    def _check_links(self) -> None:
        for circuit, address in self.links.items():
            _check_ip(address, f"the address of circuit {circuit}")
        addresses = list(self.links.values())
        if self.probe_port != 0 and len(set(addresses)) < len(addresses):
            msg = "two circuits of --link share an address; each needs its own probe socket"
            raise ValidationError(msg, hint="give each circuit its address, or --probe-port 0")
        if self.service_address is not None:
            _check_ip(self.service_address, "the service address")
        if self.data_address is not None:
            _check_ip(self.data_address, "the data address")
        if not 0 <= self.data_port <= 65535:
            msg = f"the data port {self.data_port} is not between 0 and 65535"
            raise ValidationError(msg)
        if not 0.001 <= self.probe_interval_s <= 10:
            msg = f"the probe interval must be between 0.001 and 10 s (got {self.probe_interval_s})"
            raise ValidationError(msg)
        if not 0 <= self.probe_port <= 65535:
            msg = f"the probe port {self.probe_port} is not between 0 and 65535"
            raise ValidationError(msg)
        if self.apply_routes and self.service_address is None:
            msg = "routes can be applied only with a service address for them to lead to"
            raise ValidationError(msg, hint="add --service-address")
        if self.metrics_address is not None:
            host, _, port = self.metrics_address.rpartition(":")
            if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
                msg = f"the metrics address {self.metrics_address!r} is not HOST:PORT"
                raise ValidationError(msg, hint="e.g. --metrics 0.0.0.0:9464")

    @property
    def server_urls(self) -> tuple[str, ...]:
        """The server's base URL, or its replicas' in the order they are tried."""
        return tuple(self.server_url.split(","))

    def resolved_pools(self) -> dict[str, int]:
        """GPU count per type at this site; reads the fabric file if one was given.

        Raises :class:`~onecluster.errors.FabricError` for a bad file and
        :class:`~onecluster.errors.NotFoundError` when the site is not in it.
        """
        if self.pools is not None:
            return dict(self.pools)
        assert self.fabric_path is not None  # checked at construction
        fabric = load_fabric(self.fabric_path)
        if not fabric.has_site(self.site):
            msg = f"site {self.site!r} is not in the fabric file {self.fabric_path}"
            raise NotFoundError(msg, hint=f"its sites: {', '.join(fabric.site_names)}")
        return {p.gpu_type: p.count for p in fabric.site(self.site).pools}

    def resolved_backend(self) -> str:
        """The backend to run: ``backend``, else the fabric's for the site, else ``local``.

        Raises :class:`ValidationError` when it contradicts the fabric file, or lacks (or is
        given) options it does not take (``--slurm-conf`` goes with Slurm only, the kube
        options with Kubernetes only).
        """
        named = None
        if self.fabric_path is not None:
            fabric = load_fabric(self.fabric_path)
            if fabric.has_site(self.site):
                named = fabric.site(self.site).backend
        if self.backend is not None and named is not None and self.backend != named:
            msg = (
                f"site {self.site} runs {named} in the fabric file {self.fabric_path}; "
                f"the agent was asked for --backend {self.backend}"
            )
            raise ValidationError(msg, hint="drop --backend, or fix the site's backend")
        backend = self.backend or named or "local"
        if backend not in _BACKENDS:
            msg = (
                f"site {self.site} runs {backend} in the fabric file {self.fabric_path}; "
                f"this agent drives {', '.join(_BACKENDS)}"
            )
            raise ValidationError(msg)
        if (backend == "slurm") != (self.slurm_conf is not None):
            msg = "the slurm backend needs --slurm-conf (and only it takes one)"
            raise ValidationError(
                msg, hint="e.g. --backend slurm --slurm-conf /etc/slurm/slurm.conf"
            )
        kube = (
            self.kubeconfig is not None
            or self.kube_context is not None
            or self.kueue_queue is not None
        )
        if kube and backend != "kubernetes":
            msg = "--kubeconfig, --kube-context and --kueue-queue go with the kubernetes backend"
            raise ValidationError(msg)
        return backend

    def check_links_against_fabric(self) -> None:
        """With a fabric file: :class:`ValidationError` unless every ``links`` circuit exists
        and has an end at this site (the server would refuse every report otherwise)."""
        if self.fabric_path is None or not self.links:
            return
        fabric = load_fabric(self.fabric_path)
        mine = {c.name for c in fabric.circuits if self.site in (c.a, c.b)}
        for circuit in self.links:
            if circuit not in mine:
                msg = f"circuit {circuit!r} of --link is not a circuit of site {self.site}"
                raise ValidationError(msg, hint=f"the site's circuits: {', '.join(sorted(mine))}")

    def resolved_data_dir(self) -> Path:
        """``data_dir``, or ``<work_dir>/data``."""
        return (
            Path(self.data_dir) if self.data_dir is not None else self.resolved_work_dir() / "data"
        )

    def resolved_data_address(self) -> str:
        """Where other sites reach the data endpoint: ``data_address``, the service address,
        else the address this host uses toward the server — the first of its replicas whose
        name resolves (no packet is sent to find it)."""
        if self.data_address is not None:
            return self.data_address
        if self.service_address is not None:
            return self.service_address
        for url in self.server_urls:
            host = urlsplit(url).hostname or "127.0.0.1"
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                    probe.connect((socket.gethostbyname(host), 9))
                    return str(probe.getsockname()[0])
            except OSError:
                continue
        return "127.0.0.1"

    def resolved_work_dir(self) -> Path:
        """``work_dir``, or ``~/.onecluster/agent/<site>`` when none was given."""
        if self.work_dir is not None:
            return Path(self.work_dir)
        return Path.home() / ".onecluster" / "agent" / self.site


def _check_ip(text: str, what: str) -> None:
    try:
        ipaddress.IPv4Address(text)
    except ValueError as exc:
        msg = f"{what} {text!r} is not an IPv4 address"
        raise ValidationError(msg) from exc

"""``onecluster agent``: run one site's agent (blocking, until SIGTERM or Ctrl-C)."""

from __future__ import annotations

from pathlib import Path

import typer

from onecluster.cli._config import config_of, token_of
from onecluster.cli._log_options import LOG_FORMAT_OPTION, start_logging
from onecluster.errors import AuthError, ValidationError

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``agent`` command to ``app``."""
    app.command("agent")(agent)


def agent(
    ctx: typer.Context,
    *,
    site: str = typer.Option(..., "--site", help="The fabric name of the site this agent runs."),
    backend: str | None = typer.Option(
        None,
        "--backend",
        help="Cluster backend: local, slurm or kubernetes \\[default: the fabric's, else local].",
    ),
    slurm_conf: Path | None = typer.Option(
        None, "--slurm-conf", help="slurm.conf of the site's cluster (with --backend slurm)."
    ),
    kubeconfig: Path | None = typer.Option(
        None, "--kubeconfig", help="kubeconfig of the site's cluster \\[default: ~/.kube/config]."
    ),
    kube_context: str | None = typer.Option(
        None, "--kube-context", help="kubeconfig context of the site \\[default: its current]."
    ),
    kube_namespace: str = typer.Option(
        "default", "--kube-namespace", help="Namespace the site's Jobs are created in."
    ),
    kube_image: str = typer.Option(
        "python:3.11-slim", "--kube-image", help="Container image the jobs' commands run in."
    ),
    kueue_queue: str | None = typer.Option(
        None,
        "--kueue-queue",
        help="Submit Jobs to this Kueue LocalQueue (suspended until admitted).",
    ),
    fabric: Path | None = typer.Option(
        None, "--fabric", help="Fabric file to read the site's GPU pools from."
    ),
    pool: list[str] = typer.Option(
        [], "--pool", help="A GPU pool as TYPE=COUNT (repeatable), instead of --fabric."
    ),
    work_dir: Path | None = typer.Option(
        None,
        "--work-dir",
        help="Attempts' working directories \\[default: ~/.onecluster/agent/SITE].",
    ),
    heartbeat: float = typer.Option(1.0, "--heartbeat", help="Seconds between syncs."),
    stop_grace: float = typer.Option(
        10.0, "--stop-grace", min=0.0, help="Seconds between SIGTERM and SIGKILL for jobs."
    ),
    link: list[str] = typer.Option(
        [],
        "--link",
        help="Probe a circuit: CIRCUIT=ADDRESS, this site's own address on it (repeatable).",
    ),
    service_address: str | None = typer.Option(
        None, "--service-address", help="The address other sites reach this site at."
    ),
    probe_interval: float = typer.Option(
        0.1, "--probe-interval", help="Seconds between probes of each circuit."
    ),
    probe_port: int = typer.Option(
        61862, "--probe-port", min=0, max=65535, help="UDP port of the probe sockets (0: any)."
    ),
    apply_routes: bool = typer.Option(
        False,
        "--apply-routes",
        help="Program the kernel's routes to the other sites from the server's route table.",
    ),
    metrics: str | None = typer.Option(
        None, "--metrics", help="Serve Prometheus /metrics (probes, data plane) on HOST:PORT."
    ),
    data_dir: Path | None = typer.Option(
        None,
        "--data-dir",
        help="Where received datasets and the chunk index live \\[default: WORK_DIR/data].",
    ),
    data_port: int = typer.Option(
        0, "--data-port", min=0, max=65535, help="TCP port of the data endpoint (0: any free one)."
    ),
    data_address: str | None = typer.Option(
        None,
        "--data-address",
        help="Address other sites reach the data endpoint at \\[default: the service address, "
        "else this host's address toward the server].",
    ),
    deid_key_file: Path | None = typer.Option(
        None,
        "--deid-key-file",
        help="File holding this site's key for the pseudonyms of exports (≥ 16 bytes; it "
        r"never leaves the site) \[default: $ONECLUSTER_DEID_KEY; none: no exports from here].",
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning or error."),
    log_format: str | None = LOG_FORMAT_OPTION,
) -> None:
    """Run the agent of one site: sync with the server, run its jobs through the backend.

    Needs an agent token of this site: $ONECLUSTER_TOKEN, or the global option before the
    command (onecluster --token T agent ...).
    """
    from onecluster.agent import AgentConfig, run_agent

    config = config_of(ctx)
    token = token_of(config)
    if token is None:
        msg = f"the agent of {site} needs an agent token for its site"
        raise AuthError(
            msg,
            hint="set ONECLUSTER_TOKEN or pass `onecluster --token T agent …` (an admin mints "
            "one: onecluster token create --role agent --site S)",
        )
    # Lines go to stderr (``up`` sends them to the agent's log file).
    chosen = start_logging(ctx, role="agent", level=log_level, log_format=log_format, site=site)
    run_agent(
        AgentConfig(
            site=site,
            server_url=config.server,
            token=token,
            backend=backend,
            pools=_pools(pool) if pool else None,
            fabric_path=fabric,
            work_dir=work_dir,
            heartbeat_interval_s=heartbeat,
            stop_grace_s=stop_grace,
            links=_links(link),
            service_address=service_address,
            probe_interval_s=probe_interval,
            probe_port=probe_port,
            apply_routes=apply_routes,
            metrics_address=metrics,
            data_dir=data_dir,
            data_port=data_port,
            data_address=data_address,
            deid_key=_deid_key(deid_key_file, config.deid_key),
            slurm_conf=slurm_conf,
            kubeconfig=kubeconfig,
            kube_context=kube_context,
            kube_namespace=kube_namespace,
            kube_image=kube_image,
            kueue_queue=kueue_queue,
            log_format=chosen,
        )
    )


def _pools(specs: list[str]) -> dict[str, int]:
    pools: dict[str, int] = {}
    for spec in specs:
        gpu_type, _, count = spec.partition("=")
        if not gpu_type or not count.isdigit() or int(count) < 1:
            msg = f"GPU pool {spec!r} is not TYPE=COUNT with a positive count"
            raise ValidationError(msg, hint="e.g. --pool H100=384")
        pools[gpu_type] = int(count)
    return pools


def _links(specs: list[str]) -> dict[str, str]:
    links: dict[str, str] = {}
    for spec in specs:
        circuit, _, address = spec.partition("=")
        if not circuit or not address:
            msg = f"link {spec!r} is not CIRCUIT=ADDRESS"
            raise ValidationError(msg, hint="e.g. --link sha-sin-hk=10.212.0.1")
        if circuit in links:
            msg = f"circuit {circuit} is given twice with --link"
            raise ValidationError(msg)
        links[circuit] = address
    return links


def _deid_key(key_file: Path | None, from_environment: str | None) -> bytes | None:
    """The site's de-identification key, if it has one (``None``: no exports from here)."""
    if key_file is None and from_environment is None:
        return None
    from onecluster.cli._export import read_key

    return read_key(key_file, from_environment)

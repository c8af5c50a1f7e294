"""``onecluster server``: run the control plane (blocking, until SIGTERM or Ctrl-C)."""

from __future__ import annotations

from pathlib import Path

import typer

from onecluster.cli._config import config_of
from onecluster.cli._log_options import LOG_FORMAT_OPTION, start_logging
from onecluster.cli._options import Policy

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``server`` command to ``app``."""
    app.command("server")(server)


def server(
    ctx: typer.Context,
    *,
    fabric: Path = typer.Option(..., "--fabric", help="Fabric file (YAML)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8080, "--port", min=0, max=65535, help="Port (0: any free one)."),
    db: str | None = typer.Option(
        None,
        "--db",
        help="Database URL \\[default: SQLite at <state-dir>/onecluster.db; or postgresql://…].",
        show_default=False,
    ),
    policy: Policy = typer.Option(Policy.UNIFIED, "--policy", help="unified, separate or fifo."),
    grace: float = typer.Option(
        10.0,
        "--grace",
        min=0.0,
        help=(
            "Seconds a stopped job has between SIGTERM and SIGKILL (a job that checkpoints on "
            "SIGTERM must save within it); the scheduler also preempts only where GPUs would "
            "not free up by themselves sooner."
        ),
    ),
    half_life: float = typer.Option(
        7 * 86400.0,
        "--fair-share-half-life",
        min=1.0,
        help="Seconds for a team's past GPU use to weigh half as much in fair share (7 days).",
    ),
    lease: float = typer.Option(
        900.0,  # store.DEFAULT_LEASE_S, not imported: the CLI starts without SQLAlchemy
        "--lease",
        min=10.0,
        help=(
            "Seconds each agent sync keeps a site's work its own.  A site silent this long is "
            "down and its jobs restart elsewhere (one silent 30 s already gets no new work); "
            "running jobs survive an outage of the whole control plane of up to about "
            "lease − 5 % − the agents' stop grace − 4 s (841 s at 900).  "
            "At least 10: a lease shorter than a heartbeat and a stop grace would stop every job."
        ),
    ),
    leader_lease: float = typer.Option(
        2.0,
        "--leader-lease",
        min=0.5,
        max=600.0,
        help=(
            "Seconds of the leadership lease among replicas on one database: a leader that "
            "dies is replaced within about this long; one that cannot renew it for this long "
            "is deposed and its writes refused.  Running jobs are not affected either way."
        ),
    ),
    advertise_url: str | None = typer.Option(
        None,
        "--advertise-url",
        help=(
            "URL other replicas reach this one at, to forward what only the leader answers "
            "\\[default: the URL it listens on; set it when --host is 0.0.0.0]."
        ),
        show_default=False,
    ),
    bulk_share: float = typer.Option(
        1.0,
        "--bulk-share",
        min=0.01,
        max=1.0,
        help="Share of a direct circuit's capacity one path of a transfer may fill.",
    ),
    relay_share: float = typer.Option(
        0.5,
        "--relay-share",
        min=0.01,
        max=1.0,
        help=(
            "Share of each circuit of a path relayed through a third site that a transfer may "
            "fill: the relay's circuits carry that site's own traffic first."
        ),
    ),
    register_key: Path | None = typer.Option(
        None,
        "--register-key",
        help=(
            "The export register's Ed25519 signing key file, the same for every replica "
            r"\[default: <state-dir>/register/signing.key, made by the first replica]."
        ),
        show_default=False,
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning or error."),
    log_format: str | None = LOG_FORMAT_OPTION,
) -> None:
    """Run the API server and the scheduler (blocking).

    On first start it writes a bootstrap admin token to <state-dir>/admin.token.  Start it
    several times (each with its own --state-dir, on one host or several) with the same
    PostgreSQL --db for a control plane with no single point of failure: one replica leads
    (it schedules and routes), every one serves the API.
    """
    from onecluster.fabric import load_fabric
    from onecluster.scheduler import FairShare, PolicyConfig
    from onecluster.server import ServerConfig, serve

    config = config_of(ctx)
    start_logging(ctx, role="server", level=log_level, log_format=log_format)
    serve(
        ServerConfig(
            fabric=load_fabric(fabric),
            state_dir=config.state_dir,
            db_url=db,
            host=host,
            port=port,
            policy=PolicyConfig(kind=policy.value, fair_share=FairShare(half_life_s=half_life)),
            grace_s=grace,
            lease_s=lease,
            leader_lease_s=leader_lease,
            advertise_url=advertise_url,
            bulk_share=bulk_share,
            relay_share=relay_share,
            register_key=register_key,
            log_level=log_level.lower(),
        )
    )

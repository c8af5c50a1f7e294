"""``onecluster up``: the whole fabric on this machine, a replayed workload and a live view."""

from __future__ import annotations

from pathlib import Path

import typer

from onecluster.cli._config import config_of
from onecluster.cli._render import out_console
from onecluster.errors import TraceError

__all__ = ["DEFAULT_FABRIC", "TRACE_FROM_ROOT", "register"]

DEFAULT_FABRIC = Path("examples/fabrics/three-site.yaml")
#: Where the Alibaba trace lives, relative to the project root, when this machine has it.
TRACE_FROM_ROOT = Path("../shared/data/traces/alibaba_v2023_pods.csv")


def register(app: typer.Typer) -> None:
    """Add the ``up`` command to ``app``."""
    app.command("up")(up)


def up(
    ctx: typer.Context,
    *,
    fabric: Path = typer.Option(DEFAULT_FABRIC, "--fabric", help="Fabric file (YAML)."),
    port: int | None = typer.Option(
        None, "--port", min=1, max=65535, help="API port \\[default: 8080 if free, else any]."
    ),
    duration: float = typer.Option(90.0, "--duration", help="Seconds of workload replay."),
    jobs: int | None = typer.Option(
        None, "--jobs", min=1, help="Jobs to replay \\[default: about 3.5 per second]."
    ),
    trace: Path | None = typer.Option(
        None,
        "--trace",
        help="Trace to replay a slice of \\[default: the Alibaba v2023 pod list in "
        "../shared/data/traces/ if present, else the fitted generator].",
        show_default=False,
    ),
    generator: bool = typer.Option(
        False, "--generator", help="Use the fitted generator even if the trace is present."
    ),
    seed: int = typer.Option(1, "--seed", help="Seed of the generator."),
    no_wait: bool = typer.Option(
        False, "--no-wait", help="Stop everything after the summary instead of serving."
    ),
    keep_state: bool = typer.Option(
        False, "--keep-state", help="Keep the database and agent directories of the last run."
    ),
    db: str | None = typer.Option(
        None,
        "--db",
        help="Database URL of the servers \\[default: SQLite in the state folder; "
        "postgresql://… for --replicas].",
        show_default=False,
    ),
    replicas: int = typer.Option(
        1,
        "--replicas",
        help="Server replicas to start (a few at most); more than one needs --db postgresql://….",
    ),
) -> None:
    """Run the whole fabric here: server + agents, a replayed workload, a live view.

    Starts the server and one agent per site as local processes, replays a workload through
    them, prints the summary and keeps the API up until Ctrl-C (see docs/cli.md).  With
    --replicas N and --db postgresql://… it starts N server replicas, gives the agents and
    the replay every one of them, and rides out the loss of any but the last.
    """
    from onecluster.up import UpConfig, run_up

    # every check of the options comes before anything is started or written
    if trace is not None and generator:
        msg = "--trace and --generator contradict each other"
        raise TraceError(msg, hint="give one of them, or neither for the default")
    if trace is not None and not trace.is_file():
        msg = f"trace file {trace} does not exist"
        raise TraceError(msg)
    trace_path = trace if trace is not None or generator else _default_trace()
    run_up(
        UpConfig(
            fabric_path=fabric,
            state_dir=config_of(ctx).state_dir,
            port=port,
            duration_s=duration,
            trace_path=trace_path,
            jobs=jobs,
            seed=seed,
            wait=not no_wait,
            keep_state=keep_state,
            db_url=db,
            replicas=replicas,
        ),
        out_console(),
    )


def _default_trace() -> Path | None:
    """The Alibaba trace next to the project root, if this machine has it."""
    for root in _project_roots():
        candidate = (root / TRACE_FROM_ROOT).resolve()
        if candidate.is_file():
            return candidate
    return None


def _project_roots() -> list[Path]:
    """The working directory and the source tree's root, where they hold a pyproject.toml."""
    here = Path(__file__).resolve()
    candidates = [Path.cwd(), *here.parents]
    return [p for p in candidates if (p / "pyproject.toml").is_file()]

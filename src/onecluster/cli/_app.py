"""The ``onecluster`` command: global options, the command groups, and ``main``."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import typer

from onecluster.cli import (
    _agent,
    _cancel,
    _dataset,
    _drain,
    _export,
    _fabric,
    _gateway,
    _jobs,
    _lab,
    _links,
    _logs,
    _plan,
    _push,
    _report,
    _server,
    _simulate,
    _sites,
    _submit,
    _token,
    _train,
    _transfers,
    _up,
)
from onecluster.cli._config import DEFAULT_STATE_DIR, Environment, resolve_config
from onecluster.cli._errors import ErrorMappingGroup

__all__ = ["build_app", "main"]


def build_app() -> typer.Typer:
    """A fresh Typer application with every command group registered."""
    app = typer.Typer(
        name="onecluster",
        cls=ErrorMappingGroup,
        help="GPU clusters in several data centres, run as one cluster.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(_global_options)
    for module in (
        _up,
        _server,
        _agent,
        _submit,
        _train,
        _jobs,
        _cancel,
        _logs,
        _sites,
        _dataset,
        _push,
        _transfers,
        _links,
        _simulate,
        _plan,
        _report,
        _token,
        _lab,
        _gateway,
        _export,
        _fabric,
        _drain,
    ):
        module.register(app)
    return app


def _global_options(
    ctx: typer.Context,
    server: str | None = typer.Option(
        None,
        "--server",
        help="Server URL, or several replicas' URLs separated by commas, tried in turn "
        "\\[default: $ONECLUSTER_SERVER, <state-dir>/server.url, http://127.0.0.1:8080].",
        show_default=False,
    ),
    token: str | None = typer.Option(
        None,
        "--token",
        help="API token \\[default: $ONECLUSTER_TOKEN, <state-dir>/admin.token].",
        show_default=False,
    ),
    state_dir: Path = typer.Option(
        DEFAULT_STATE_DIR,
        "--state-dir",
        help="State directory of the local `onecluster up`.",
    ),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks of unexpected errors."),
) -> None:
    """GPU clusters in several data centres, run as one cluster."""
    environment = ctx.obj if isinstance(ctx.obj, Environment) else Environment()
    ctx.obj = resolve_config(
        server=server,
        token=token,
        state_dir=state_dir,
        debug=debug,
        environment=environment,
    )


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> None:
    """The console entry point: reads the environment once, runs the app, exits.

    ``argv`` and ``environ`` default to the process's own; tests pass their own.
    """
    command = typer.main.get_command(build_app())
    environment = Environment.from_mapping(os.environ if environ is None else environ)
    command.main(
        args=list(sys.argv[1:] if argv is None else argv),
        prog_name="onecluster",
        obj=environment,
    )

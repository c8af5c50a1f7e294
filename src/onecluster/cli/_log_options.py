"""``--log-format`` and ``--log-level`` of the long-running commands, and the one call that
sets up their log (:func:`start_logging`; the format and setup are :mod:`onecluster.logs`).

The format: ``--log-format`` → ``$ONECLUSTER_LOG_FORMAT`` → ``text``.  The variable is how
``up`` and ``lab`` get every process they start to log JSON: children inherit it.
"""

from __future__ import annotations

import typer

from onecluster.cli._config import config_of
from onecluster.errors import ValidationError
from onecluster.logs import LogFormat, setup_logging

__all__ = ["LOG_FORMAT_OPTION", "log_format_of", "start_logging"]

LOG_FORMAT_OPTION = typer.Option(
    None,
    "--log-format",
    help="text, or json: one JSON object a line \\[default: $ONECLUSTER_LOG_FORMAT, else text].",
    show_default=False,
)


def log_format_of(ctx: typer.Context, flag: str | None) -> LogFormat:
    """The format ``flag`` or the environment asks for; :class:`ValidationError` naming
    where a wrong one came from."""
    environment = config_of(ctx).log_format
    value, source = next(
        (
            (value, source)
            for value, source in (
                (flag, "--log-format"),
                (environment, "$ONECLUSTER_LOG_FORMAT"),
            )
            if value
        ),
        (LogFormat.TEXT.value, "the default"),
    )
    try:
        return LogFormat.parse(value, source=source)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None


def start_logging(
    ctx: typer.Context, *, role: str, level: str, log_format: str | None, site: str | None = None
) -> LogFormat:
    """Set up this process's log (stderr) for ``role`` at ``level``; the format chosen.

    :class:`ValidationError` for a wrong level or format, before anything is set up.
    """
    chosen = log_format_of(ctx, log_format)
    try:
        setup_logging(role=role, level=level, log_format=chosen, site=site)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
    return chosen

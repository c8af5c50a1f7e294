"""Option types shared by several commands, and how on/off flags show in ``--help``."""

from __future__ import annotations

import enum

import typer
from typer.core import TyperGroup, TyperOption

__all__ = ["Policy", "Role", "show_flags_without_values"]


class Policy(enum.StrEnum):
    """The scheduling policies (see ``docs/scheduler.md``): onecluster's, and two baselines."""

    UNIFIED = "unified"
    SEPARATE = "separate"
    FIFO = "fifo"


class Role(enum.StrEnum):
    """The roles a token can carry."""

    ADMIN = "admin"
    MEMBER = "member"
    AGENT = "agent"
    COMPLIANCE = "compliance"
    AUDITOR = "auditor"


def show_flags_without_values(
    command: typer.core.TyperCommand | TyperGroup, ctx: typer.Context
) -> None:
    """Make every on/off flag of ``command`` and its subcommands show as ``--json``, not
    ``--json <bool>``, in ``--help`` (``--help`` itself included).

    Typer's help prints each option's type, flags too, which reads as if ``--preemptible``
    took a value.  A flag's metavar is what its help shows instead of the type; an empty one
    shows nothing.  Idempotent.
    """
    for param in command.get_params(ctx):
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    if isinstance(command, TyperGroup):
        for sub in command.commands.values():
            if isinstance(sub, typer.core.TyperCommand | TyperGroup):
                show_flags_without_values(sub, ctx)

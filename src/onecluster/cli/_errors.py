"""The one place where the CLI turns errors into messages and exit codes.

* :class:`~onecluster.errors.PlatformError` → ``error: <message>`` (and ``hint: <hint>``) on
  stderr, exit with its ``exit_code`` (2 invalid, 3 not found, 4 conflict, 5 auth,
  6 unavailable, 7 backend, 1 other);
* a request body the CLI built from bad option values (pydantic refuses it) → the same as
  :class:`~onecluster.errors.ValidationError` (exit 2), naming the field;
* Ctrl-C → exit 130;
* anything else → ``error: unexpected <Type>: <message>`` and exit 1; the traceback is shown
  only with ``--debug``.

Usage errors (bad flags) stay with Typer, which exits 2.
"""

from __future__ import annotations

import traceback
from typing import Any

import pydantic
import typer
from rich.markup import escape
from typer.core import TyperGroup

from onecluster.cli._config import CliConfig
from onecluster.cli._render import err_console
from onecluster.errors import PlatformError, ValidationError

__all__ = ["INTERRUPTED_EXIT_CODE", "ErrorMappingGroup", "exit_code_for", "report_error"]

#: The shell's convention for a process stopped by SIGINT.
INTERRUPTED_EXIT_CODE = 130


class ErrorMappingGroup(TyperGroup):
    """The root command group: runs the chosen command and maps whatever it raises."""

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except KeyboardInterrupt:
            err_console().print("interrupted", style="yellow")
            raise typer.Exit(INTERRUPTED_EXIT_CODE) from None
        except Exception as caught:  # noqa: BLE001 (the one place every error is reported)
            exc = _as_platform_error(caught)
            config = ctx.obj if isinstance(ctx.obj, CliConfig) else None
            report_error(exc, debug=config.debug if config else False)
            raise typer.Exit(exit_code_for(exc)) from None


def _as_platform_error(exc: Exception) -> Exception:
    """Option values that make an invalid request body are the user's input error."""
    if not isinstance(exc, pydantic.ValidationError):
        return exc
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "input"
    reason = str(first["msg"]).removeprefix("Value error, ")
    msg = f"invalid value for {field}: {reason}"
    return ValidationError(msg, hint="see --help for what each option takes")


def exit_code_for(exc: BaseException) -> int:
    """The process exit status for ``exc``."""
    if isinstance(exc, PlatformError):
        return exc.exit_code
    return 1


def report_error(exc: BaseException, *, debug: bool) -> None:
    """Print ``exc`` to stderr the way the CLI always does."""
    console = err_console()
    if debug:
        console.print(escape("".join(traceback.format_exception(exc)).rstrip()), style="dim")
    if isinstance(exc, PlatformError):
        console.print(f"[bold red]error:[/] {escape(exc.message)}")
        if exc.hint:
            console.print(f"[bold]hint:[/] {escape(exc.hint)}")
        return
    console.print(f"[bold red]error:[/] unexpected {type(exc).__name__}: {escape(str(exc))}")
    if not debug:
        console.print("[bold]hint:[/] run again with --debug to see the traceback")

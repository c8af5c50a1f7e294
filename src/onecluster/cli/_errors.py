"""The one place where the CLI turns errors into messages and exit codes.

* :class:`~onecluster.errors.PlatformError` → ``error: <message>`` (and ``hint: <hint>``) on
  stderr, exit with its ``exit_code`` (2 invalid, 3 not found, 4 conflict, 5 auth,
  6 unavailable, 7 backend, 8 the gateway's rate limit, 9 a failed check, 10 data that did
  not make it — a scan or transfer that failed or was cancelled, data that failed its
  verification —, 1 other);
* a request body the CLI built from bad option values (pydantic refuses it) → the same as
  :class:`~onecluster.errors.ValidationError` (exit 2), naming the field;
* Ctrl-C → exit 130;
* stdout closed by its reader (``onecluster jobs | head -1``) → exit 141 (128 + SIGPIPE, what
  the shell reports for ``yes | head -1``), nothing on stderr;
* anything else → ``error: unexpected <Type>: <message>`` and exit 1; the traceback is shown
  only with ``--debug``.

Usage errors (bad flags) stay with Typer, which exits 2.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pydantic
import typer
from rich.markup import escape
from typer.core import TyperGroup

from onecluster.cli._config import CliConfig
from onecluster.cli._options import show_flags_without_values
from onecluster.cli._render import err_console
from onecluster.errors import PlatformError, ValidationError

__all__ = [
    "BROKEN_PIPE_EXIT_CODE",
    "INTERRUPTED_EXIT_CODE",
    "CheckFailedError",
    "ErrorMappingGroup",
    "ScanFailedError",
    "TransferFailedError",
    "exit_code_for",
    "report_error",
]

#: The shell's convention for a process stopped by SIGINT.
INTERRUPTED_EXIT_CODE = 130
#: The shell's status of a process that SIGPIPE ended (128 + 13): its reader went away.
BROKEN_PIPE_EXIT_CODE = 141


class CheckFailedError(PlatformError):
    """A check ran and the thing checked fails it (``links check``): neither a bug nor bad
    input, so a script can tell it apart from both."""

    code = "check_failed"
    exit_code = 9


class ScanFailedError(PlatformError):
    """A scan that ``dataset add`` waited for failed at its site (the agent's error is in the
    message): exit 10, as data that failed verification (``IntegrityError``)."""

    code = "scan_failed"
    exit_code = 10


class TransferFailedError(PlatformError):
    """A transfer that ``push`` waited for failed (or was cancelled) instead of putting the
    data at its destination: exit 10, as data that failed verification."""

    code = "transfer_failed"
    exit_code = 10


class ErrorMappingGroup(TyperGroup):
    """The root command group: runs the chosen command and maps whatever it raises."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]
        show_flags_without_values(self, ctx)
        with _quiet_on_broken_pipe():  # ``onecluster --help | head -1``
            return super().parse_args(ctx, args)

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            with _quiet_on_broken_pipe():
                result = super().invoke(ctx)
                sys.stdout.flush()  # a closed pipe shows here, not at the interpreter's exit
                return result
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


@contextmanager
def _quiet_on_broken_pipe() -> Iterator[None]:
    """A write to a stdout whose reader has gone ends the command: exit 141, stderr silent."""
    was_devnull = _stdout_is_devnull()
    try:
        yield
    except BrokenPipeError:
        # What is still buffered can never be written: point stdout at /dev/null so the
        # interpreter's last flush does not report the same broken pipe again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):  # not a real file (a test runner's buffer)
            pass
        raise typer.Exit(BROKEN_PIPE_EXIT_CODE) from None
    except SystemExit as exc:
        # Rich (Typer's help too) meets a broken pipe by pointing stdout at /dev/null and
        # exiting 1, which would read as a bug.
        if exc.code == 1 and not was_devnull and _stdout_is_devnull():
            raise typer.Exit(BROKEN_PIPE_EXIT_CODE) from None
        raise


def _stdout_is_devnull() -> bool:
    try:
        return os.path.samestat(os.fstat(sys.stdout.fileno()), Path(os.devnull).stat())
    except (OSError, ValueError):
        return False


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

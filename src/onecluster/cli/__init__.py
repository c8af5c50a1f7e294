"""The ``onecluster`` command line: a thin layer over the SDK (parse, call, render, exit)."""

from onecluster.cli._app import build_app, main

__all__ = ["build_app", "main"]

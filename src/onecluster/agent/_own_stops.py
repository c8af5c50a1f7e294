"""The attempts a site's agent stopped on its own account, kept on disk.

An attempt the agent stops because its lease ran out, or because it shuts down, did not fail
on its own: it is reported ``lost`` and its job is requeued.  That must hold even when the
agent that stopped it dies before it could say so — the next agent on the same work
directory finds the attempt ended (say with 143, SIGTERM) and would otherwise report that
as the job's exit.  So the ids are written down *before* the stops are sent (a crash in
between costs a rerun of a job, never the job), and dropped once the attempt is forgotten.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path

from onecluster.agent._watchdog import stopped_by_watchdog

__all__ = ["OwnStops"]

_log = logging.getLogger("onecluster.agent")


class OwnStops:
    """A set of attempt ids, persisted to ``path`` (``None``: in memory only)."""

    def __init__(self, path: Path | None = None, *, watchdog_dir: Path | None = None) -> None:
        self._path = path
        self._watchdog_dir = watchdog_dir
        self._ids: set[str] = set()
        if path is not None:
            try:
                body = json.loads(path.read_text(encoding="utf-8"))
                self._ids = {str(i) for i in body.get("stopped_by_agent", [])}
            except FileNotFoundError:
                pass
            except (OSError, ValueError, AttributeError, TypeError) as exc:
                _log.warning("ignoring the unreadable agent state file %s: %s", path, exc)

    def __contains__(self, attempt_id: object) -> bool:
        if attempt_id in self._ids:
            return True
        # Those the agent's watchdog stopped while the agent could not (its own file).
        return self._watchdog_dir is not None and attempt_id in stopped_by_watchdog(
            self._watchdog_dir
        )

    def add(self, attempt_ids: Iterable[str]) -> None:
        """Note ``attempt_ids`` (before stopping them)."""
        new = set(attempt_ids) - self._ids
        if new:
            self._ids |= new
            self._save()

    def discard(self, attempt_id: str) -> None:
        """Forget ``attempt_id`` (the server has its end)."""
        if attempt_id in self._ids:
            self._ids.discard(attempt_id)
            self._save()

    def _save(self) -> None:
        if self._path is None:
            return
        tmp = self._path.with_name(self._path.name + ".tmp")
        try:
            tmp.write_text(json.dumps({"stopped_by_agent": sorted(self._ids)}), encoding="utf-8")
            tmp.replace(self._path)
        except OSError as exc:
            _log.warning("cannot write the agent state file %s: %s", self._path, exc)

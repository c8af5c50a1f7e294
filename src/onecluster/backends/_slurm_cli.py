"""The Slurm commands the Slurm backend uses, with machine-readable output only.

``sbatch --parsable`` (the job id), ``squeue --states=all --json`` (jobs, finished ones
included for ``MinJobAge``), ``sinfo --json`` (nodes and their GRES), ``scancel``.  Every
command runs with ``SLURM_CONF`` pointing at the site's cluster and a timeout; failures are
:class:`~onecluster.errors.BackendError` (the command and what Slurm said), a controller that
does not answer is :class:`SlurmUnavailable`.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onecluster.errors import BackendError

__all__ = ["SlurmCli", "SlurmJob", "SlurmUnavailable", "decode_exit", "parse_gres"]

_GRES = re.compile(r"gpu:([A-Za-z0-9_.-]+):(\d+)")


class SlurmUnavailable(BackendError):
    """The site's slurmctld does not answer (down, or too slow).

    ``maybe_done``: the command timed out, so Slurm may have carried it out all the same.
    """

    maybe_done: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SlurmJob:
    """One job as ``squeue --json`` reports it (times in epoch seconds, 0 when unset)."""

    job_id: int
    name: str
    state: str
    exit_code: int
    start_time: int
    end_time: int
    reason: str


def decode_exit(status: int) -> int:
    """Slurm's raw wait status → a shell-style exit code: ``status >> 8`` for a normal exit,
    ``128 + signal`` for a process killed by a signal (as the local backend reports)."""
    signal = status & 0x7F
    return 128 + signal if signal else (status >> 8) & 0xFF


def parse_gres(text: str) -> dict[str, int]:
    """``gpu:h800:4,gpu:a100:2`` (or with ``(S:0-1)`` suffixes) → ``{"h800": 4, "a100": 2}``."""
    found: dict[str, int] = {}
    for gpu_type, count in _GRES.findall(text or ""):
        found[gpu_type] = found.get(gpu_type, 0) + int(count)
    return found


class SlurmCli:
    """Runs Slurm's commands against the cluster of ``slurm_conf``."""

    def __init__(
        self, slurm_conf: Path, *, timeout_s: float = 3.0, environ: Mapping[str, str] | None = None
    ) -> None:
        self.slurm_conf = slurm_conf
        self._timeout_s = timeout_s
        self._env = {**(environ or {}), "SLURM_CONF": str(slurm_conf)}

    def _run(self, argv: Sequence[str], what: str, *, env: Mapping[str, str] | None = None) -> str:
        environment = {**(env or self._env), "SLURM_CONF": str(self.slurm_conf)}
        try:
            done = subprocess.run(
                list(argv),
                capture_output=True,
                text=True,
                timeout=self._timeout_s,
                env=environment,
                check=False,
            )
        except FileNotFoundError as exc:
            msg = f"cannot {what}: {argv[0]} is not installed"
            raise BackendError(msg, hint="install slurm-client (scripts/slurm.sh does)") from exc
        except subprocess.TimeoutExpired as exc:
            msg = f"cannot {what}: Slurm did not answer within {self._timeout_s:g} s"
            slow = SlurmUnavailable(msg, hint="is slurmctld running and reachable?")
            slow.maybe_done = True
            raise slow from exc
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
            msg = f"cannot {what}: `{' '.join(argv[:2])} …` said: {said}"
            if "Unable to contact slurm controller" in said or "Connection refused" in said:
                raise SlurmUnavailable(msg, hint="is slurmctld running?")
            raise BackendError(msg)
        return done.stdout

    def _json(self, argv: Sequence[str], what: str) -> dict[str, Any]:
        text = self._run(argv, what)
        try:
            body: dict[str, Any] = json.loads(text)
        except ValueError as exc:
            msg = f"cannot {what}: `{argv[0]}` printed something that is not JSON"
            raise BackendError(msg) from exc
        errors = body.get("errors") or []
        if errors:
            msg = f"cannot {what}: {errors[0]}"
            raise SlurmUnavailable(msg, hint="is slurmctld running?")
        return body

    def submit(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> int:
        """``sbatch --parsable`` with ``argv`` (options, script, script arguments) and the job's
        environment ``env`` (exported by ``--export=ALL``); the job id."""
        out = self._run(["sbatch", "--parsable", *argv], "submit a job to Slurm", env=env).strip()
        job_id = out.split(";", 1)[0]
        if not job_id.isdigit():
            msg = f"sbatch answered {out!r}, not a job id"
            raise BackendError(msg)
        return int(job_id)

    def jobs(self) -> list[SlurmJob]:
        """Every job the controller still knows, finished ones included."""
        body = self._json(["squeue", "--states=all", "--json"], "list the Slurm jobs")
        return [
            SlurmJob(
                job_id=int(j["job_id"]),
                name=str(j.get("name", "")),
                state=str(j.get("job_state", "")),
                exit_code=decode_exit(int(j.get("exit_code") or 0)),
                start_time=int(j.get("start_time") or 0),
                end_time=int(j.get("end_time") or 0),
                reason=str(j.get("state_reason", "")),
            )
            for j in body.get("jobs", [])
        ]

    def gpus(self) -> dict[str, int]:
        """GPUs per GRES type on nodes that can run jobs (not down, drained or failing)."""
        body = self._json(["sinfo", "--json"], "read the Slurm nodes")
        found: dict[str, int] = {}
        for node in body.get("nodes", []):
            state = str(node.get("state", "")).lower()
            flags = {str(f).lower() for f in node.get("state_flags", [])}
            if state in {"down", "drained", "fail", "future", "unknown"} or flags & {
                "drain",
                "fail",
                "down",
            }:
                continue
            for gpu_type, count in parse_gres(str(node.get("gres", ""))).items():
                found[gpu_type] = found.get(gpu_type, 0) + count
        return found

    def cancel(self, job: int | str, *, signal: str | None = None) -> None:
        """``scancel`` the job, by id or by name (with ``signal``: only signal it, ``--full``
        batch and steps)."""
        argv = ["scancel"]
        if signal is not None:
            argv += [f"--signal={signal}", "--full"]
        argv += [str(job)] if isinstance(job, int) else [f"--name={job}"]
        self._run(argv, f"cancel Slurm job {job}")

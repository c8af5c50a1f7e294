"""Bounded field types of the wire format: every string, number and list a client sends has
a limit, so no request can make the server store (and every later listing carry) megabytes.

Names follow the domain's rules (``onecluster.model``): a name a request carries is checked
the same way the fabric file's names are.  The limits are listed in ``docs/contracts.md``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, ConfigDict, Field, StrictInt

from onecluster.model import MAX_GPUS, MAX_LABEL, label_problem, name_problem

__all__ = [
    "MAX_COMMAND_ARGS",
    "MAX_COMMAND_CHARS",
    "MAX_DURATION_S",
    "MAX_ID",
    "MAX_INT",
    "MAX_LOG_CHARS",
    "MAX_TEXT",
    "REPORT",
    "STRICT",
    "Count",
    "DatasetName",
    "GpuCount",
    "GpuType",
    "Id",
    "JobName",
    "SiteName",
    "TeamName",
    "Text",
]

#: Longest id a client may send (job, attempt, agent ids are far shorter).
MAX_ID = 128
#: Longest free text (a problem report, a waiting reason …) and the default for any string.
MAX_TEXT = 4096
#: Most arguments of a job's command, and most characters in all of them together: a
#: longer script belongs in a file the command runs.
MAX_COMMAND_ARGS = 1024
MAX_COMMAND_CHARS = 16_384
#: Longest job duration estimate: a year (366 days).
MAX_DURATION_S = 366 * 86_400.0
#: Largest count or offset on the wire (2⁵³ − 1: exact in every JSON parser).
MAX_INT = 2**53 - 1
#: Most characters of log text in one chunk of an agent sync (a chunk is at most 64 KiB).
MAX_LOG_CHARS = 65_536

#: The config of every request body: strict types (``"8"`` is not a number, ``1`` is not
#: ``true``; JSON's integers still count as floats), unknown fields refused, every string
#: bounded unless its field says otherwise.
STRICT = ConfigDict(strict=True, extra="forbid", frozen=True, str_max_length=MAX_TEXT)
#: The config of an agent's reports: the same, except that unknown fields are ignored, so an
#: agent newer than its server still syncs during a rolling upgrade (a refused sync would
#: make it fence its jobs).
REPORT = ConfigDict(strict=True, extra="ignore", frozen=True, str_max_length=MAX_TEXT)


def _name(kind: str) -> AfterValidator:
    def check(value: str) -> str:
        problem = name_problem(kind, value)
        if problem is not None:
            raise ValueError(problem)
        return value

    return AfterValidator(check)


def _label(kind: str, max_length: int) -> AfterValidator:
    def check(value: str) -> str:
        problem = label_problem(kind, value, max_length)
        if problem is not None:
            raise ValueError(problem)
        return value

    return AfterValidator(check)


# Names follow the domain's rule: lower-case, 1-63 characters.
TeamName = Annotated[str, Field(max_length=MAX_LABEL), _name("team")]
SiteName = Annotated[str, Field(max_length=MAX_LABEL), _name("site")]
DatasetName = Annotated[str, Field(max_length=MAX_LABEL), _name("dataset")]
#: A GPU type (``H100``, ``A100-80G``): a label of at most 63 characters.
GpuType = Annotated[str, Field(max_length=MAX_LABEL), _label("GPU type", 63)]
#: A job's name, shown to people: printable, no bidi overrides, 1-128 characters.
JobName = Annotated[str, Field(max_length=MAX_LABEL), _label("job name", MAX_LABEL)]
#: An id (job, attempt, agent): 1-128 characters.
Id = Annotated[str, Field(min_length=1, max_length=MAX_ID)]
#: Free text from a program (a problem report, a waiting reason).
Text = Annotated[str, Field(max_length=MAX_TEXT)]
#: A count of GPUs: 0 to 10⁶.
GpuCount = Annotated[StrictInt, Field(ge=0, le=MAX_GPUS)]
#: A count or offset: 0 to 2⁵³ − 1.
Count = Annotated[StrictInt, Field(ge=0, le=MAX_INT)]

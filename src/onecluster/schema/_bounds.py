"""Bounded field types of the wire format: every string, number and list a client sends has
a limit, so no request can make the server store (and every later listing carry) megabytes.

Names follow the domain's rules (``onecluster.model``): a name a request carries is checked
the same way the fabric file's names are.  The limits are listed in ``docs/contracts.md``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field

from onecluster.model import MAX_GPUS, MAX_LABEL, label_problem, name_problem

__all__ = [
    "MAX_CHECKPOINT_INTERVAL_S",
    "MAX_COMMAND_ARGS",
    "MAX_COMMAND_CHARS",
    "MAX_DURATION_S",
    "MAX_ID",
    "MAX_INT",
    "MAX_LOG_CHARS",
    "MAX_TEXT",
    "MIN_CHECKPOINT_INTERVAL_S",
    "REPORT",
    "STRICT",
    "WHOLE",
    "Count",
    "DatasetName",
    "ExitCode",
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
#: Checkpoint intervals a job may declare: 1 second to 30 days (a job that saves less often
#: keeps next to nothing from a preemption; it should declare no interval).
MIN_CHECKPOINT_INTERVAL_S = 1.0
MAX_CHECKPOINT_INTERVAL_S = 30 * 86_400.0
#: Largest count or offset on the wire (2⁵³ − 1: exact in every JSON parser).
MAX_INT = 2**53 - 1
#: Most characters of log text in one chunk of an agent sync (a chunk is at most 64 KiB).
MAX_LOG_CHARS = 65_536

#: The config of every request body: strict types (``"8"`` is not a number, ``1`` is not
#: ``true``; JSON's integers count as floats, and whole fields take :data:`WHOLE`), unknown
#: fields refused, every string bounded unless its field says otherwise.
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


# The OpenAPI document states the rules as patterns, so clients (and the fuzz test) know
# them; the validators give the precise message.  The label pattern leaves out the C0/C1
# controls, the bidi and zero-width characters and the separators (the validator refuses
# every Unicode control and format character).
_NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,62}$"
_HIDDEN = (
    r"\x00-\x1f\x7f-\x9f\xad\u061c\u180e\u200b-\u200f\u2028-\u202e"
    r"\u2060-\u2064\u2066-\u206f\ufeff"
)
_LABEL_PATTERN = rf"^[^\s{_HIDDEN}](?:[^{_HIDDEN}]*[^\s{_HIDDEN}])?$"


def _named() -> Any:
    return Field(max_length=MAX_LABEL, json_schema_extra={"pattern": _NAME_PATTERN})


def _labelled(max_length: int) -> Any:
    return Field(min_length=1, max_length=max_length, json_schema_extra={"pattern": _LABEL_PATTERN})


# Names follow the domain's rule: lower-case, 1-63 characters.
TeamName = Annotated[str, _named(), _name("team")]
SiteName = Annotated[str, _named(), _name("site")]
DatasetName = Annotated[str, _named(), _name("dataset")]
#: A GPU type (``H100``, ``A100-80G``): a label of at most 63 characters.
GpuType = Annotated[str, _labelled(63), _label("GPU type", 63)]
#: A job's name, shown to people: printable, no bidi overrides, 1-128 characters.
JobName = Annotated[str, _labelled(MAX_LABEL), _label("job name", MAX_LABEL)]
#: An id (job, attempt, agent): 1-128 characters.
Id = Annotated[str, Field(min_length=1, max_length=MAX_ID)]
#: Free text from a program (a problem report, a waiting reason).
Text = Annotated[str, Field(max_length=MAX_TEXT)]


def _whole_number(value: object) -> object:
    """JSON has one kind of number: ``8.0`` is the whole number 8 (JSON Schema agrees), while
    ``8.5``, ``"8"`` and ``true`` stay what they are and the strict check refuses them."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: Makes an ``int`` field whole on the wire: ``8`` or ``8.0``, never ``"8"``, ``8.5`` or
#: ``true``.  It goes after the field's bounds (so that they reach the OpenAPI document).
WHOLE = BeforeValidator(_whole_number)
#: A count of GPUs: 0 to 10⁶.
GpuCount = Annotated[int, Field(ge=0, le=MAX_GPUS), WHOLE]
#: A count or offset: 0 to 2⁵³ − 1.
Count = Annotated[int, Field(ge=0, le=MAX_INT), WHOLE]
#: A process's exit status, or minus the signal that ended it: a 32-bit integer.
ExitCode = Annotated[int, Field(ge=-(2**31), lt=2**31), WHOLE]

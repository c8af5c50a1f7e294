"""Every field a client sends is typed strictly and bounded; names refuse hidden characters."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest

from onecluster.errors import ImpossibleJobError
from onecluster.schema import AgentSync, JobSubmit, LinkReport, TokenCreate

JOB: dict[str, Any] = {"team": "llm", "gpus": 8, "duration_s": 60, "command": ["true"]}


def _refused(model: type[pydantic.BaseModel], body: dict[str, Any]) -> str:
    """The message of the refusal of ``body`` as it comes off the wire (JSON)."""
    with pytest.raises(pydantic.ValidationError) as caught:
        model.model_validate_json(json.dumps(body))
    return str(caught.value)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"gpus": "8"}, "valid integer"),
        ({"gpus": 8.5}, "valid integer"),
        ({"gpus": float("inf")}, "valid integer"),
        ({"gpus": True}, "valid integer"),
        ({"gpus": 10**7}, "less than or equal to 1000000"),
        ({"duration_s": "60"}, "valid number"),
        ({"duration_s": 1e308}, "less than or equal to 31622400"),
        ({"dataset_gb": 1e300}, "less than or equal to"),
        ({"max_sites": 10**6}, "less than or equal to 1000"),
        ({"preemptible": 1}, "valid boolean"),
        ({"preemptible": "yes"}, "valid boolean"),
        ({"name": "x" * 129}, "at most 128 characters"),
        ({"name": "x" * 10_000_000}, "at most 128 characters"),
        ({"name": "evil\u202egpj.exe"}, "U+202E"),
        ({"name": "a\u2066b"}, "U+2066"),
        ({"name": "line\nbreak"}, "U+000A"),
        ({"name": "zero\u200bwidth"}, "U+200B"),
        ({"name": " padded "}, "blanks"),
        ({"name": ""}, "at least 1 character"),
        ({"team": "llm\u202e"}, "team name"),
        ({"team": "l" * 64}, "team name"),
        ({"dataset": "Cc\u2067"}, "dataset name"),
        ({"gpu_types": ["H100\u202d"]}, "U+202D"),
        ({"gpu_types": ["H100"] * 65}, "at most 64 items"),
        ({"command": ["x" * 16_385]}, "at most 16384 characters"),
        ({"command": ["x" * 9000, "y" * 9000]}, "the command is 18000 characters long"),
        ({"command": ["true"] * 1025}, "at most 1024 items"),
        ({"command": ["sh", "-c", "a\x00b"]}, "NUL"),
        ({"checkpoint_interval_s": 0}, "greater than or equal to 1"),
        ({"checkpoint_interval_s": -600}, "greater than or equal to 1"),
        ({"checkpoint_interval_s": 0.5}, "greater than or equal to 1"),
        ({"checkpoint_interval_s": float("nan")}, "finite number"),
        ({"checkpoint_interval_s": float("inf")}, "finite number"),
        ({"checkpoint_interval_s": 30 * 86_400 + 1}, "less than or equal to 2592000"),
        ({"checkpoint_interval_s": "600"}, "valid number"),
        ({"checkpoint_interval_s": True}, "valid number"),
        ({"checkpoint_on_sigterm": 1}, "valid boolean"),
        ({"checkpoint_on_sigterm": "true"}, "valid boolean"),
        ({"checkpoint_on_sigterm": None}, "valid boolean"),
    ],
)
def test_a_job_outside_the_bounds_is_refused_by_name(change: dict[str, Any], needle: str) -> None:
    assert needle in _refused(JobSubmit, JOB | change)


def test_json_integers_are_floats_and_a_job_at_every_bound_is_taken() -> None:
    body = JobSubmit.model_validate_json(
        json.dumps(
            JOB
            | {
                "duration_s": 366 * 86_400,
                "gpus": 1_000_000,
                "name": "Train LLaMA 7B — run #3",
                "command": ["x" * 8192, "y" * 8192],
                "dataset_gb": 100_000_000,
                "max_sites": 1000,
            }
        )
    )
    assert body.duration_s == 31_622_400.0
    assert isinstance(body.duration_s, float)
    whole = JobSubmit.model_validate_json(json.dumps(JOB | {"gpus": 8.0, "max_sites": 2.0}))
    assert (whole.gpus, whole.max_sites) == (8, 2)  # JSON has one kind of number
    assert body.to_spec().name == "Train LLaMA 7B — run #3"


def test_a_jobs_checkpoints_reach_its_spec_at_every_bound() -> None:
    for interval in (1, 30 * 86_400):
        body = JobSubmit.model_validate_json(
            json.dumps(JOB | {"checkpoint_interval_s": interval, "checkpoint_on_sigterm": True})
        )
        spec = body.to_spec()
        assert (spec.checkpoint_interval_s, spec.checkpoint_on_sigterm) == (float(interval), True)
    plain = JobSubmit.model_validate_json(json.dumps(JOB)).to_spec()
    assert (plain.checkpoint_interval_s, plain.checkpoint_on_sigterm) == (None, False)


@pytest.mark.parametrize("command", [None, [], [""], ["  "], ["", "train.py"]])
def test_a_job_without_a_command_is_an_impossible_job(command: list[str] | None) -> None:
    body = dict(JOB)
    if command is None:
        del body["command"]
    else:
        body["command"] = command
    with pytest.raises(ImpossibleJobError, match="needs a command") as caught:
        JobSubmit.model_validate(body).to_spec()
    assert caught.value.hint is not None and "train.py" in caught.value.hint


@pytest.mark.parametrize(
    "body",
    [
        {"role": "member", "team": "llm\u202e"},
        {"role": "agent", "site": "x" * 10_000},
        {"role": "member", "team": 7},
    ],
)
def test_token_scopes_are_names(body: dict[str, Any]) -> None:
    _refused(TokenCreate, body)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"capacity": {"H800": -5}}, "greater than or equal to 0"),
        ({"capacity": {"H800": 10**23}}, "less than or equal to 1000000"),
        ({"capacity": {"H800": "8"}}, "valid integer"),
        ({"capacity": {"H" * 64: 8}}, "at most 63 characters"),
        ({"capacity": {f"T{i}": 1 for i in range(65)}}, "at most 64 items"),
        ({"agent_id": ""}, "at least 1 character"),
        ({"agent_id": "a" * 129}, "at most 128 characters"),
        ({"backend": "x" * 33}, "at most 32 characters"),
        ({"problem": "x" * 2001}, "at most 2000 characters"),
        (
            {
                "attempts": [
                    {"attempt_id": "x", "job_id": "j", "state": "exited", "exit_code": 2**40}
                ]
            },
            "less than 2147483648",
        ),
        (
            {"attempts": [{"attempt_id": "x" * 200, "job_id": "j", "state": "running"}]},
            "at most 128 characters",
        ),
        (
            {"attempts": [{"attempt_id": "x", "job_id": "j", "state": "running", "queued": 0}]},
            "valid boolean",
        ),
        ({"logs": [{"attempt_id": "x", "offset": 2**60, "data": ""}]}, "less than or equal to"),
        ({"logs": [{"attempt_id": "x", "offset": 0, "data": "x" * 65_537}]}, "at most 65536"),
    ],
)
def test_an_agent_report_outside_the_bounds_is_refused(change: dict[str, Any], needle: str) -> None:
    assert needle in _refused(AgentSync, {"agent_id": "a-1"} | change)


def test_an_agent_report_ignores_fields_it_does_not_know() -> None:
    """An agent newer than its server must still sync (a refused sync fences its jobs)."""
    sync = AgentSync.model_validate_json(
        json.dumps(
            {
                "agent_id": "a-1",
                "from_the_future": 1,
                "attempts": [{"attempt_id": "x", "job_id": "j", "state": "running", "new": 2}],
            }
        )
    )
    assert sync.attempts[0].attempt_id == "x"


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"circuit": "c" * 64}, "at most 63 characters"),
        ({"sent": 2**60}, "less than or equal to"),
        ({"lost": "1"}, "valid integer"),
        ({"endpoint": "10.0.0.1:0400"}, "port from 1 to 65535"),
        ({"endpoint": "10.0.0.1:0"}, "port from 1 to 65535"),
        ({"endpoint": "10.0.0.1:65536"}, "port from 1 to 65535"),
        ({"samples": [{"seq": -1, "sent_s": 1.0}]}, "greater than or equal to 0"),
    ],
)
def test_a_link_report_outside_the_bounds_is_refused(change: dict[str, Any], needle: str) -> None:
    body = {"circuit": "sha-sin", "endpoint": "10.0.0.1:4000"} | change
    assert needle in _refused(LinkReport, body)

"""The wire format: request bodies validate themselves and convert to domain types."""

from __future__ import annotations

import pydantic
import pytest

from onecluster.errors import ImpossibleJobError
from onecluster.model import PriorityClass
from onecluster.schema import AgentSync, JobSubmit, TokenCreate


def test_a_submission_becomes_a_job_spec_with_bytes_and_priority() -> None:
    body = JobSubmit.model_validate(
        {
            "team": "llm",
            "gpus": 16,
            "duration_s": 60,
            "dataset": "cc",
            "dataset_gb": 1.5,
            "priority": "high",
            "gpu_types": ["H100"],
            "command": ["sh", "-c", "true"],
        }
    )
    spec = body.to_spec()
    assert (spec.gpus, spec.dataset_bytes, spec.priority) == (16, 1_500_000_000, PriorityClass.HIGH)
    assert spec.gpu_types == ("H100",)
    assert spec.command == ("sh", "-c", "true")
    assert body.to_spec(dataset_bytes=7).dataset_bytes == 7


def test_zero_gpus_is_an_impossible_job_and_a_bad_team_name_is_invalid() -> None:
    with pytest.raises(ImpossibleJobError, match="at least 1 GPU"):
        JobSubmit(team="llm", gpus=0, duration_s=1.0, command=["true"]).to_spec()
    with pytest.raises(pydantic.ValidationError, match="team name 'Bad Team' is not valid"):
        JobSubmit(team="Bad Team", gpus=1, duration_s=1.0)


@pytest.mark.parametrize(
    "body",
    [
        {"team": "llm", "gpus": -1, "duration_s": 1},
        {"team": "llm", "gpus": 1, "duration_s": 0},
        {"team": "llm", "gpus": 1, "duration_s": 1, "priority": "urgent"},
        {"team": "llm", "gpus": 1, "duration_s": 1, "max_sites": 0},
        {"team": "llm", "gpus": 1, "duration_s": 1, "unknown_field": True},
    ],
)
def test_malformed_submissions_are_refused(body: dict[str, object]) -> None:
    with pytest.raises(pydantic.ValidationError):
        JobSubmit.model_validate(body)


def test_token_scopes_must_match_their_role() -> None:
    assert TokenCreate(role="member", team="llm").team == "llm"
    assert TokenCreate(role="agent", site="tokyo").site == "tokyo"
    for bad in (
        {"role": "member"},
        {"role": "member", "team": "llm", "site": "tokyo"},
        {"role": "agent", "team": "llm"},
        {"role": "admin", "team": "llm"},
        {"role": "root"},
    ):
        with pytest.raises(pydantic.ValidationError):
            TokenCreate.model_validate(bad)


def test_agent_sync_accepts_the_contract_example() -> None:
    sync = AgentSync.model_validate(
        {
            "agent_id": "a-1",
            "backend": "local",
            "capacity": {"H100": 384},
            "attempts": [
                {
                    "attempt_id": "x",
                    "job_id": "j",
                    "state": "exited",
                    "exit_code": 0,
                    "started_at": 1.0,
                    "finished_at": 2.0,
                }
            ],
            "logs": [{"attempt_id": "x", "offset": 0, "data": "text"}],
        }
    )
    assert sync.attempts[0].exit_code == 0
    with pytest.raises(pydantic.ValidationError):
        AgentSync.model_validate(
            {"agent_id": "a", "attempts": [{"attempt_id": "x", "job_id": "j", "state": "zombie"}]}
        )

"""reconcile: the agent's pure decision from desired and observed attempts."""

from __future__ import annotations

from typing import Any

from onecluster.agent import StopOrder, reconcile
from onecluster.backends import AttemptStatus
from onecluster.model import AttemptState
from onecluster.schema import DesiredAttempt


def order(attempt_id: str, action: str = "run", **extra: Any) -> DesiredAttempt:
    fields: dict[str, Any] = {
        "attempt_id": attempt_id,
        "job_id": f"j-{attempt_id}",
        "action": action,
        "command": ["sh", "-c", "true"],
        "gpu_type": "H100",
        "gpus": 2,
        "env": {"K": "V"},
        "grace_s": 7.0,
        "reason": None,
        **extra,
    }
    return DesiredAttempt(**fields)


def seen(attempt_id: str, state: AttemptState) -> AttemptStatus:
    return AttemptStatus(attempt_id=attempt_id, job_id=f"j-{attempt_id}", state=state)


RUNNING, EXITED, LOST = AttemptState.RUNNING, AttemptState.EXITED, AttemptState.LOST


def test_a_new_run_order_becomes_a_start_with_the_servers_spec() -> None:
    actions = reconcile([order("a")], [], started=set(), drained=set(), default_grace_s=1.0)
    (spec,) = actions.starts
    assert (spec.attempt_id, spec.job_id, spec.command, spec.gpu_type, spec.gpus) == (
        "a",
        "j-a",
        ("sh", "-c", "true"),
        "H100",
        2,
    )
    assert dict(spec.env) == {"K": "V"}
    assert (actions.stops, actions.forgets) == ((), ())


def test_run_is_never_repeated_for_a_held_or_once_started_attempt() -> None:
    desired = [order("held"), order("gone")]
    actions = reconcile(
        desired, [seen("held", RUNNING)], started={"held", "gone"}, drained=set(), default_grace_s=1
    )
    assert actions.starts == ()
    actions = reconcile(
        [order("held")], [seen("held", EXITED)], started=set(), drained=set(), default_grace_s=1
    )
    assert actions.starts == ()


def test_stop_orders_apply_to_running_attempts_only() -> None:
    desired = [order("r", "stop", reason="preempted"), order("x", "stop"), order("n", "stop")]
    observed = [seen("r", RUNNING), seen("x", EXITED)]
    actions = reconcile(desired, observed, started=set(), drained=set(), default_grace_s=1.0)
    assert actions.stops == (StopOrder(attempt_id="r", grace_s=7.0, reason="preempted"),)
    assert actions.starts == ()


def test_unlisted_attempts_are_stopped_or_forgotten_once_drained() -> None:
    observed = [
        seen("run", RUNNING),
        seen("done", EXITED),
        seen("lost", LOST),
        seen("tail", EXITED),
    ]
    actions = reconcile([], observed, started=set(), drained={"done", "lost"}, default_grace_s=3.0)
    assert actions.stops == (
        StopOrder(attempt_id="run", grace_s=3.0, reason="the server no longer lists this attempt"),
    )
    assert actions.forgets == ("done", "lost")


def test_listed_finished_attempts_are_kept_for_reporting() -> None:
    actions = reconcile(
        [order("done")],
        [seen("done", EXITED)],
        started={"done"},
        drained={"done"},
        default_grace_s=1,
    )
    assert (actions.starts, actions.stops, actions.forgets) == ((), (), ())


def test_a_malformed_run_order_is_rejected_with_the_reason() -> None:
    actions = reconcile(
        [order("bad", command=[]), order("ok")], [], started=set(), drained=set(), default_grace_s=1
    )
    assert [s.attempt_id for s in actions.starts] == ["ok"]
    (rejected,) = actions.rejected
    assert rejected.attempt_id == "bad"
    assert "needs a command" in rejected.message

"""The store on its own: a janitor's release is not undone twice, one bad operation does not
spoil its batch, and a batch of prompts reserves for every answer."""

from __future__ import annotations

from pathlib import Path

from harness import T0

from onecluster.errors import UnavailableError
from onecluster.gateway import CallRecord, GatewayStore
from onecluster.gateway._quota import Ask, Limits
from onecluster.gateway._records import Reservation
from onecluster.gateway._store import ReserveOp, SettleOp
from onecluster.gateway._wire import Endpoint, parse_request

LIMITS = Limits(rpm=100, tpm=10_000, daily=10**12, monthly=10**12)


def _record(request_id: str, tokens: int = 10) -> CallRecord:
    return CallRecord(
        request_id=request_id,
        at=T0,
        team="a",
        key_id="k",
        model="m",
        endpoint="chat/completions",
        stream=False,
        http_status=200,
        outcome="ok",
        attempts=1,
        prompt_tokens=tokens,
        completion_tokens=0,
        cost=tokens * 5,
    )


def test_a_call_the_janitor_released_is_counted_once_when_it_ends(tmp_path: Path) -> None:
    store = GatewayStore(tmp_path / "g.db")
    (held,) = store.apply([ReserveOp("r1", (("team:a", LIMITS),), Ask(1_000, 5_000), T0)])
    assert isinstance(held, Reservation)
    assert store.release_stale(T0 + 1) == 1  # the janitor: its process looked dead
    assert store.apply([SettleOp(_record("r1"), held)]) == [True]
    minute = store.counters("team:a", T0)["minute"]
    month = store.counters("team:a", T0)["month"]
    assert (minute.tokens, minute.reserved_tokens) == (10, 0)
    assert (month.spend, month.reserved_spend) == (50, 0)


def test_one_bad_operation_fails_alone(tmp_path: Path) -> None:
    store = GatewayStore(tmp_path / "g.db")
    good = ReserveOp("good", (("team:a", LIMITS),), Ask(10, 10), T0)
    bad = SettleOp(_record("bad\udcff"), None)  # cannot be encoded for any database
    results = store.apply([good, bad])
    assert isinstance(results[0], Reservation)
    assert isinstance(results[1], UnavailableError)
    assert store.counters("team:a", T0)["minute"].reserved_tokens == 10


def test_a_batch_of_prompts_reserves_for_every_answer() -> None:
    body = b'{"model":"m","prompt":["a","b","c"],"n":2,"best_of":4}'
    assert parse_request(Endpoint.COMPLETIONS, body).choices == 12

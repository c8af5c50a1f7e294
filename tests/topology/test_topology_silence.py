"""A site's own judgement of its circuits from its probe replies: silent after ``silence_s``
without a reply, back after 5 s of replies, damped like the server when it flaps — on an
injected clock, from proven silence only."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from onecluster.topology import SilenceWatch

INTERVAL = 0.02  # 50 probes a second
SILENCE = 8 * INTERVAL


class Circuit:
    """Replies of one circuit every probe interval, fed to the watch as the prober would,
    and a settle after each (the fast-reroute thread's look)."""

    def __init__(self, watch: SilenceWatch, name: str = "c1", now: float = 100.0) -> None:
        self.watch = watch
        self.name = name
        self.now = now
        self.last: float | None = None
        self.changes = 0
        self._silent = False

    def answer(self, seconds: float) -> None:
        end = self.now + seconds
        while self.now < end - 1e-9:
            self.now += INTERVAL
            quiet = 0.0 if self.last is None else max(self.now - INTERVAL - self.last, 0.0)
            self.watch.heard(self.name, self.now, quiet_s=quiet, rtt_ms=68.0)
            self.last = self.now
            self._settle()

    def silence(self, seconds: float) -> None:
        end = self.now + seconds
        while self.now < end - 1e-9:
            self.now += INTERVAL
            self._settle()

    def _settle(self) -> None:
        silent = self.name in self.watch.settle(self.now)
        self.changes += silent != self._silent
        self._silent = silent

    @property
    def silent(self) -> bool:
        return self.name in self.watch.silent


def test_a_cut_is_silent_after_silence_s_and_not_before() -> None:
    c = Circuit(SilenceWatch(SILENCE))
    c.answer(2.0)
    assert not c.silent
    last = c.now
    assert c.watch.settle(last + SILENCE - 0.001) == frozenset()
    assert c.watch.settle(last + SILENCE + 0.001) == {"c1"}


def test_the_next_look_is_due_when_a_working_circuits_silence_would_be() -> None:
    watch = SilenceWatch(SILENCE)
    assert watch.deadline() is None
    watch.heard("a", 100.0)
    watch.heard("b", 100.1)
    assert watch.deadline() == 100.0 + SILENCE
    watch.settle(100.2)  # a is silent now: only b's silence is still to come
    assert watch.deadline() == 100.1 + SILENCE


def test_lost_probes_shorter_than_the_silence_change_nothing() -> None:
    c = Circuit(SilenceWatch(SILENCE))
    for _ in range(50):  # seven probes lost in a row, fifty times over
        c.answer(0.5)
        c.silence(7 * INTERVAL - 0.001)
    assert c.changes == 0


def test_a_healed_circuit_comes_back_after_five_steady_seconds() -> None:
    c = Circuit(SilenceWatch(SILENCE))
    c.answer(2.0)
    c.silence(1.0)
    assert c.silent
    healed = c.now
    c.answer(4.9)
    assert c.silent  # replies, but not 5 s of them yet
    c.answer(0.2)
    assert not c.silent and c.now - healed >= 5.0
    assert c.changes == 2


def test_twelve_flaps_make_one_change_and_the_circuit_stays_out_until_damping_decays() -> None:
    """The issue's flap: down 1 s every 5 s for 60 s; one route change, as on the server."""
    c = Circuit(SilenceWatch(SILENCE))
    c.answer(5.0)
    for _ in range(12):
        c.silence(1.0)
        c.answer(4.0)
    assert c.changes == 1 and c.silent
    assert c.watch.statistics().silences == {"c1": 12}
    c.answer(30.0)  # steady again, but penalised: held out well past 5 s
    assert c.silent
    c.answer(120.0)
    assert not c.silent and c.changes == 2


def test_a_silence_that_ended_between_two_looks_still_counts() -> None:
    watch = SilenceWatch(SILENCE)
    watch.heard("c1", 100.0)
    assert watch.settle(100.0) == frozenset()
    # nobody looked for 0.5 s; the reply at 100.5 says the circuit was proven silent 0.4 s
    watch.heard("c1", 100.5, quiet_s=0.4)
    assert watch.settle(100.5) == {"c1"}  # and it must now prove 5 s of replies
    assert watch.statistics().silences == {"c1": 1}


def test_a_prober_that_ran_late_is_not_a_silent_circuit() -> None:
    """The prober read nothing for 0.5 s because its thread did not run: it says so by not
    moving ``until``, and the late replies carry no proven silence."""
    watch = SilenceWatch(SILENCE)
    watch.heard("c1", 100.0)
    assert watch.settle(100.0) == frozenset()
    assert watch.settle(100.0) == frozenset()  # no turn finished: until stays put
    for i in range(25):  # the backlog, read at once when the thread runs again
        watch.heard("c1", 100.5 + i * 1e-5, quiet_s=0.0)
    assert watch.settle(100.45) == frozenset()
    assert watch.statistics().silences == {"c1": 0}


def test_only_circuits_that_answered_and_are_probed_are_judged() -> None:
    watch = SilenceWatch(SILENCE)
    assert watch.settle(1_000.0, probing={"c1", "c2"}) == frozenset()  # no reply ever yet
    watch.heard("c1", 1_000.0)
    assert watch.settle(1_001.0, probing={"c1"}) == {"c1"}
    # its far end is no longer known: not probed, so its silence means nothing
    assert watch.settle(1_002.0, probing=set()) == frozenset()


def test_each_circuit_is_judged_on_its_own() -> None:
    watch = SilenceWatch(SILENCE)
    for i in range(100):  # both answer for 2 s, then only b for 0.5 s
        now = 100.0 + i * INTERVAL
        watch.heard("a", now)
        watch.heard("b", now)
        watch.settle(now)
    for i in range(1, 26):
        now = 102.0 + i * INTERVAL
        watch.heard("b", now)
        watch.settle(now)
    assert watch.silent == {"a"}


@given(st.lists(st.floats(min_value=0.001, max_value=SILENCE - 0.002), min_size=1, max_size=200))
def test_replies_never_further_apart_than_the_silence_are_never_silent(gaps: list[float]) -> None:
    watch = SilenceWatch(SILENCE)
    now = 10.0
    watch.heard("c1", now)
    for gap in gaps:
        assert watch.settle(now + gap) == frozenset()
        now += gap
        watch.heard("c1", now, quiet_s=gap)
    assert watch.settle(now) == frozenset()


@given(st.floats(min_value=SILENCE + 0.001, max_value=30.0), st.floats(min_value=0.0, max_value=20))
def test_any_silence_past_the_threshold_is_seen_however_it_is_looked_at(
    gap: float, up_before: float
) -> None:
    watch = SilenceWatch(SILENCE)
    watch.heard("c1", 10.0)
    watch.heard("c1", 10.0 + up_before)
    last = 10.0 + up_before
    live = SilenceWatch(SILENCE)  # the same silence, looked at while it lasts
    live.heard("c1", 10.0)
    live.heard("c1", last)
    assert live.settle(last + gap) == {"c1"}
    # ... or learnt only from the reply that ended it
    watch.heard("c1", last + gap + 0.01, quiet_s=gap)
    assert watch.settle(last + gap + 0.01) == {"c1"}

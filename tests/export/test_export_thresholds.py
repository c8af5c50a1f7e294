"""The route a year's distinct individuals call for, and the year's tally."""

from __future__ import annotations

import pytest

from onecluster.export import Route, YearTally, required_route


@pytest.mark.parametrize(
    ("individuals", "sensitive", "route", "warned"),
    [
        (0, 0, Route.EXEMPT, False),
        (79_999, 0, Route.EXEMPT, False),
        (80_000, 0, Route.EXEMPT, True),
        (99_999, 0, Route.EXEMPT, True),
        (100_000, 0, Route.STANDARD_CONTRACT, False),
        (10, 1, Route.STANDARD_CONTRACT, False),  # any sensitive PI leaves the exemption
        (799_999, 0, Route.STANDARD_CONTRACT, False),
        (800_000, 0, Route.STANDARD_CONTRACT, True),
        (9_000, 8_000, Route.STANDARD_CONTRACT, True),
        (999_999, 9_999, Route.STANDARD_CONTRACT, True),
        (1_000_000, 0, Route.SECURITY_ASSESSMENT, False),
        (10_000, 10_000, Route.SECURITY_ASSESSMENT, False),
    ],
)
def test_the_lines(individuals: int, sensitive: int, route: Route, warned: bool) -> None:
    required = required_route(individuals, sensitive)
    assert required.route is route
    assert (required.warning is not None) is warned
    assert required.reason


def test_ciio_and_important_data_always_need_an_assessment() -> None:
    assert required_route(1, 0, ciio=True).route is Route.SECURITY_ASSESSMENT
    assert required_route(0, 0, important_data=True).route is Route.SECURITY_ASSESSMENT


def test_impossible_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="impossible"):
        required_route(5, 6)
    with pytest.raises(ValueError, match="impossible"):
        required_route(-1, 0)


def test_the_tally_unions_exports_per_entity_and_year() -> None:
    tally = YearTally()
    assert tally.add("acme", 2026, [b"a", b"b"]) == (2, 0)
    # The same people in another dataset do not count twice (no splitting).
    assert tally.add("acme", 2026, [b"b", b"c"], sensitive=[b"c"]) == (3, 1)
    assert tally.add("acme", 2027, [b"a"]) == (1, 0)  # a new year starts from zero
    assert tally.add("other", 2026, [b"a"]) == (1, 0)
    assert tally.counts("acme", 2026) == (3, 1)
    assert tally.counts("nobody", 2026) == (0, 0)

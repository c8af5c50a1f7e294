"""ServerList: parsing a list of server URLs, and which one is current as replicas fail."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onecluster.client import ServerList, parse_servers
from onecluster.errors import ValidationError


def test_a_comma_separated_list_is_parsed_in_order_without_spaces_or_trailing_slashes() -> None:
    assert parse_servers(" http://a:8080/ , https://b.example:8443,http://10.0.0.3:8080/api/") == (
        "http://a:8080",
        "https://b.example:8443",
        "http://10.0.0.3:8080/api",
    )
    assert parse_servers("http://a:8080") == ("http://a:8080",)


def test_a_sequence_is_taken_as_it_is_and_its_items_may_hold_lists() -> None:
    assert parse_servers(["http://a:1", "http://b:2,http://c:3"]) == (
        "http://a:1",
        "http://b:2",
        "http://c:3",
    )


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("", "--server is empty"),
        (" , ", "--server is empty"),
        ("http://a:1,,http://b:2", "has an empty entry (number 2)"),
        ("http://a:1,", "has an empty entry (number 2)"),
        ("http://a:1,localhost:2", "'localhost:2' (--server) must start with http:// or https://"),
        ("ftp://a:1", "must start with http:// or https://"),
        ("http://", "names no host"),
        ("http://a b:1", "names no host, or holds a space"),
        ("http://a:70000", "has port 70000, not one of 1 to 65535"),
        ("http://a:1?x=1", "takes no ?query or #fragment"),
        ("http://a:1,http://a:1/", "names the same server twice: 'http://a:1' and 'http://a:1/'"),
        ("http://A:80,http://a", "names the same server twice"),
    ],
)
def test_a_list_that_cannot_work_is_refused_naming_where_it_came_from(
    value: str, words: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        parse_servers(value, source="--server")
    assert words in raised.value.message
    assert raised.value.hint is not None and "separated by commas" in raised.value.hint


def test_the_first_is_current_a_failure_moves_on_and_an_answer_sticks() -> None:
    servers = ServerList("http://a:1,http://b:2,http://c:3")
    assert servers.current == "http://a:1"
    assert servers.rotation() == ("http://a:1", "http://b:2", "http://c:3")
    assert servers.failed("http://a:1") == "http://b:2"
    assert servers.rotation() == ("http://b:2", "http://c:3", "http://a:1")
    servers.answered("http://c:3")
    assert servers.current == "http://c:3"
    assert servers.failed("http://c:3") == "http://a:1"  # round-robin: after the last, the first
    # A failure of one that is no longer current (another request moved on) changes nothing.
    assert servers.failed("http://b:2") == "http://a:1"
    assert str(servers) == "http://a:1,http://b:2,http://c:3"
    assert len(servers) == 3


def test_one_server_stays_current_whatever_happens() -> None:
    servers = ServerList("http://a:1/")
    assert servers.failed("http://a:1") == "http://a:1"
    assert servers.rotation() == ("http://a:1",)


@given(
    count=st.integers(min_value=1, max_value=6),
    events=st.lists(st.tuples(st.booleans(), st.integers(min_value=0, max_value=5)), max_size=30),
)
def test_a_rotation_always_tries_every_server_once_from_the_current_one(
    count: int, events: list[tuple[bool, int]]
) -> None:
    urls = [f"http://s{i}:8080" for i in range(count)]
    servers = ServerList(urls)
    for ok, which in events:
        url = urls[which % count]
        servers.answered(url) if ok else servers.failed(url)
        rotation = servers.rotation()
        assert sorted(rotation) == sorted(urls)
        assert rotation[0] == servers.current
        # The order is the given one, wrapped around.
        start = urls.index(servers.current)
        assert list(rotation) == urls[start:] + urls[:start]

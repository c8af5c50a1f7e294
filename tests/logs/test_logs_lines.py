"""A process's log lines: JSON (one object a line, with the fields a log pipeline indexes)
or text, each with the process's role and site and the request id of the request being
handled; request ids offered by callers are taken only when sane."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from onecluster.logs import (
    LogFormat,
    accepted_request_id,
    current_request_id,
    new_request_id,
    request_id_bound,
    setup_logging,
)


@pytest.fixture
def root_restored() -> Iterator[None]:
    """setup_logging changes the root logger: put back what pytest had."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_json_line_carries_time_level_logger_message_role_site_and_extra_fields(
    root_restored: None,
) -> None:
    out = io.StringIO()
    setup_logging(role="agent", site="singapore", log_format=LogFormat.JSON, stream=out)
    logging.getLogger("onecluster.agent").info("synced %d attempts", 3, extra={"took_ms": 4.5})
    (line,) = lines(out)
    assert line["time"].endswith("Z") and line["time"][10] == "T"  # type: ignore[union-attr,index]
    assert {k: v for k, v in line.items() if k != "time"} == {
        "level": "INFO",
        "logger": "onecluster.agent",
        "message": "synced 3 attempts",
        "role": "agent",
        "site": "singapore",
        "took_ms": 4.5,
    }


def test_a_json_line_has_the_request_id_and_the_exception_text_on_one_line(
    root_restored: None,
) -> None:
    out = io.StringIO()
    setup_logging(role="server", log_format=LogFormat.JSON, stream=out)
    with request_id_bound("req-42"):
        try:
            1 / 0  # noqa: B018
        except ZeroDivisionError:
            logging.getLogger("x").exception("it broke: %s", "sadly")
    assert len(out.getvalue().splitlines()) == 1
    (line,) = lines(out)
    assert (line["request_id"], line["message"], line["level"]) == (
        "req-42",
        "it broke: sadly",
        "ERROR",
    )
    assert "ZeroDivisionError" in line["exception"]  # type: ignore[operator]
    assert "site" not in line  # not known: left out rather than null


def test_a_value_json_cannot_hold_is_written_as_its_text(root_restored: None) -> None:
    out = io.StringIO()
    setup_logging(role="gateway", log_format=LogFormat.JSON, stream=out)
    logging.getLogger("x").warning("odder", extra={"thing": object()})
    assert lines(out)[0]["thing"].startswith("<object object")  # type: ignore[union-attr]


def test_text_stays_the_default_and_names_the_request_id_and_fields(root_restored: None) -> None:
    out = io.StringIO()
    setup_logging(role="server", stream=out)
    logging.getLogger("onecluster.server").info("plain")
    with request_id_bound("abc"):
        logging.getLogger("onecluster.server").warning("with id", extra={"status": 502})
    first, second = out.getvalue().splitlines()
    assert first.endswith(" INFO onecluster.server: plain")
    assert second.endswith(" WARNING onecluster.server: with id request_id=abc status=502")


def test_setup_leaves_one_handler_honours_the_level_and_quiets_httpx(root_restored: None) -> None:
    out = io.StringIO()
    setup_logging(role="agent", stream=io.StringIO())
    setup_logging(role="agent", level="warning", stream=out)
    assert len(logging.getLogger().handlers) == 1
    logging.getLogger("x").info("not shown")
    logging.getLogger("x").warning("shown")
    assert logging.getLogger("httpx").level == logging.WARNING
    assert [line.split(": ", 1)[1] for line in out.getvalue().splitlines()] == ["shown"]


def test_a_wrong_level_or_format_is_refused_naming_the_choices(root_restored: None) -> None:
    before = list(logging.getLogger().handlers)
    with pytest.raises(ValueError, match="unknown log level 'loud'; use one of trace, debug"):
        setup_logging(role="server", level="loud")
    assert logging.getLogger().handlers == before  # nothing changed
    with pytest.raises(ValueError, match=r"--log-format is 'yaml'; use one of text, json"):
        LogFormat.parse("yaml", source="--log-format")
    assert LogFormat.parse(" JSON ", source="x") is LogFormat.JSON


@pytest.mark.parametrize(
    "offered",
    [
        "abc",
        "0f1e2d3c-aaaa-bbbb-cccc-1234567890ab",
        "Root=1-67891233-abcdef012345678912345678",
        "a" * 128,
    ],
)
def test_a_sane_request_id_is_taken(offered: str) -> None:
    assert accepted_request_id(offered) == offered


@pytest.mark.parametrize(
    "offered", [None, "", "a" * 129, "has space", 'quote"d', "new\nline", "semi;colon", "日本"]
)
def test_any_other_request_id_is_not(offered: str | None) -> None:
    assert accepted_request_id(offered) is None


def test_a_new_request_id_is_sane_and_unique() -> None:
    ids = {new_request_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(accepted_request_id(i) == i for i in ids)


def test_a_bound_request_id_is_restored_after_its_block() -> None:
    assert current_request_id() is None
    with request_id_bound("outer"):
        with request_id_bound("inner"):
            assert current_request_id() == "inner"
        assert current_request_id() == "outer"
    assert current_request_id() is None


def test_without_a_stream_records_go_to_stderr_as_it_is_when_they_are_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A handler bound to the stderr of its set-up kept writing to it after a test runner's
    capture (or a daemon's redirection) had closed it: every later record was an error."""
    first, then = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stderr", first)
    setup_logging(role="server")
    monkeypatch.setattr("sys.stderr", then)
    first.close()
    logging.getLogger("onecluster.test").warning("after the swap")
    written = then.getvalue()
    assert "after the swap" in written and "Logging error" not in written, written

"""Where the CLI finds its server and token: flag, environment, state files, default."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from onecluster.cli import build_app
from onecluster.cli._config import DEFAULT_SERVER, Environment, resolve_config, token_of
from onecluster.errors import AuthError, ValidationError


def _resolve(
    state: Path,
    *,
    server: str | None = None,
    token: str | None = None,
    env: Environment | None = None,
) -> tuple[str, str | None]:
    config = resolve_config(
        server=server, token=token, state_dir=state, debug=False, environment=env or Environment()
    )
    return config.server, config.token


def test_defaults_without_anything(tmp_path: Path) -> None:
    assert _resolve(tmp_path) == (DEFAULT_SERVER, None)


def test_state_files_of_up_are_used_when_nothing_else_is_given(tmp_path: Path) -> None:
    (tmp_path / "server.url").write_text("http://127.0.0.1:9123/\n")
    (tmp_path / "admin.token").write_text("tok-from-up\n")
    assert _resolve(tmp_path) == ("http://127.0.0.1:9123", "tok-from-up")


def test_environment_beats_state_files_and_flags_beat_both(tmp_path: Path) -> None:
    (tmp_path / "server.url").write_text("http://127.0.0.1:9123\n")
    (tmp_path / "admin.token").write_text("tok-from-up\n")
    env = Environment(server="http://env:1", token="tok-env")
    assert _resolve(tmp_path, env=env) == ("http://env:1", "tok-env")
    assert _resolve(tmp_path, server="https://flag:2", token="tok-flag", env=env) == (
        "https://flag:2",
        "tok-flag",
    )


def test_environment_mapping_ignores_empty_and_unrelated_variables() -> None:
    env = Environment.from_mapping({"ONECLUSTER_SERVER": "", "ONECLUSTER_TOKEN": "t", "HOME": "/x"})
    assert env == Environment(server=None, token="t")


def test_server_url_without_scheme_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="must start with http"):
        _resolve(tmp_path, server="localhost:8080")


def test_empty_state_files_are_ignored(tmp_path: Path) -> None:
    (tmp_path / "admin.token").write_text("\n")
    assert _resolve(tmp_path) == (DEFAULT_SERVER, None)


def test_whitespace_around_a_token_is_dropped_wherever_it_comes_from(tmp_path: Path) -> None:
    env = Environment.from_mapping({"ONECLUSTER_TOKEN": "tok-env\r\n"})
    assert _resolve(tmp_path, env=env)[1] == "tok-env"
    assert _resolve(tmp_path, token=" tok-flag\n")[1] == "tok-flag"
    assert Environment.from_mapping({"ONECLUSTER_TOKEN": " \n"}).token is None  # blank: unset


def test_a_malformed_token_is_refused_where_it_is_used_naming_its_source(tmp_path: Path) -> None:
    (tmp_path / "admin.token").write_text("oc_abc\x1bdef\n")
    config = resolve_config(
        server=None, token=None, state_dir=tmp_path, debug=False, environment=Environment()
    )  # resolving alone refuses nothing: `simulate` needs no token
    with pytest.raises(AuthError) as raised:
        token_of(config)
    assert raised.value.message == (
        f"the token from {tmp_path / 'admin.token'} is malformed: "
        "character 7 is a control character ('\\x1b')"
    )


def test_the_agent_refuses_a_malformed_token_before_it_starts(tmp_path: Path) -> None:
    args = ["--server", "http://127.0.0.1:9", "--token", "oc_a b", "agent", "--site", "tokyo"]
    args += ["--pool", "H100=8", "--work-dir", str(tmp_path / "work")]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 5
    assert "the token from --token is malformed: character 5 is a space" in result.stderr
    assert not (tmp_path / "work").exists()


def test_several_servers_from_the_flag_or_the_environment_are_kept_in_order(
    tmp_path: Path,
) -> None:
    config = resolve_config(
        server=" http://a:1/ , http://b:2",
        token=None,
        state_dir=tmp_path,
        debug=False,
        environment=Environment(),
    )
    assert (config.server, config.servers) == (
        "http://a:1,http://b:2",
        ("http://a:1", "http://b:2"),
    )
    env = Environment.from_mapping({"ONECLUSTER_SERVER": "http://a:1,https://b:2\n"})
    assert _resolve(tmp_path, env=env)[0] == "http://a:1,https://b:2"


@pytest.mark.parametrize(
    ("flag", "env", "words"),
    [
        ("http://a:1,,http://b:2", None, "--server 'http://a:1,,http://b:2' has an empty entry"),
        ("http://a:1,http://a:1/", None, "--server names the same server twice"),
        (None, "http://a:1,b:2", "server URL 'b:2' ($ONECLUSTER_SERVER) must start with http"),
    ],
)
def test_a_server_list_that_cannot_work_is_refused_naming_where_it_came_from(
    tmp_path: Path, flag: str | None, env: str | None, words: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        _resolve(tmp_path, server=flag, env=Environment(server=env))
    assert words in raised.value.message
    args = ["--state-dir", str(tmp_path), *(["--server", flag] if flag else []), "sites"]
    result = CliRunner().invoke(build_app(), args, obj=Environment(server=env))
    assert result.exit_code == 2
    assert words in result.stderr


@pytest.mark.integration
def test_the_cli_moves_on_from_a_dead_server_to_a_live_one(server: tuple[str, str]) -> None:
    url, admin = server
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"  # nothing listens once closed
    for args, env in (
        (["--server", f"{dead},{url}"], Environment(token=admin)),
        ([], Environment(server=f"{dead}, {url}", token=admin)),
    ):
        result = CliRunner().invoke(build_app(), [*args, "sites", "--json"], obj=env)
        assert result.exit_code == 0, result.stderr
        assert [s["name"] for s in json.loads(result.stdout)] == [
            "shanghai",
            "singapore",
            "tokyo",
        ]
    result = CliRunner().invoke(build_app(), ["--server", dead, "--token", admin, "sites"])
    assert result.exit_code == 6
    assert f"cannot reach the onecluster server at {dead}" in result.stderr

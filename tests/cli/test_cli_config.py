"""Where the CLI finds its server and token: flag, environment, state files, default."""

from __future__ import annotations

from pathlib import Path

import pytest

from onecluster.cli._config import DEFAULT_SERVER, Environment, resolve_config
from onecluster.errors import ValidationError


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

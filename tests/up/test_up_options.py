"""The options of `up` that pick its servers: a bad --replicas, several replicas on SQLite, a
database URL that names no supported database — each a clear error and exit 2, before
anything is started or written."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from onecluster.cli import build_app
from onecluster.errors import ValidationError
from onecluster.up import MAX_REPLICAS, UpConfig

FABRIC = Path(__file__).parents[2] / "examples" / "fabrics" / "three-site.yaml"
PG = "postgresql://onecluster@db.example:5432/onecluster"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"replicas": 0}, r"--replicas 0 is not between 1 and 5"),
        ({"replicas": MAX_REPLICAS + 1, "db_url": PG}, r"--replicas 6 is not between 1 and 5"),
        ({"replicas": 2}, r"2 server replicas need PostgreSQL; the database is SQLite in the"),
        ({"replicas": 3, "db_url": "sqlite:///x.db"}, r"3 server replicas need PostgreSQL"),
        ({"db_url": "not a url"}, r"--db 'not a url' is not a database URL"),
        ({"db_url": "mysql://u:secret@h/d"}, r"--db 'mysql://u:\*\*\*@h/d' names 'mysql'"),
        ({"db_url": ""}, r"--db '' is not a database URL"),
    ],
)
def test_options_that_cannot_work_are_refused_with_what_to_do(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message) as caught:
        UpConfig(fabric_path=FABRIC, **options)  # type: ignore[arg-type]
    assert caught.value.hint


@pytest.mark.parametrize(
    ("options", "replicas"),
    [
        ({}, 1),
        ({"db_url": PG}, 1),
        ({"db_url": "sqlite:///x.db"}, 1),
        ({"db_url": PG, "replicas": 3}, 3),
    ],
)
def test_one_server_on_any_database_or_several_on_postgresql_are_taken(
    options: dict[str, object], replicas: int
) -> None:
    config = UpConfig(fabric_path=FABRIC, **options)  # type: ignore[arg-type]
    assert config.replicas == replicas


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--replicas", "2"], "2 server replicas need PostgreSQL"),
        (["--replicas", "2", "--db", "sqlite:///x.db"], "2 server replicas need PostgreSQL"),
        (["--replicas", "0", "--db", PG], "--replicas 0 is not between 1 and 5"),
        (["--db", "postgres ql://x"], "is not a database URL"),
    ],
)
def test_the_cli_exits_2_and_starts_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    state = tmp_path / "state"
    result = CliRunner().invoke(
        build_app(), ["--state-dir", str(state), "up", "--fabric", str(FABRIC), *args]
    )
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "hint:" in result.output
    assert not state.exists()  # nothing was started or written

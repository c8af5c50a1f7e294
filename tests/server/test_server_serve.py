"""``serve`` checks its configuration before uvicorn starts: one clear error, nothing half-up."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from onecluster.errors import UnavailableError, ValidationError
from onecluster.fabric import load_fabric
from onecluster.server import ServerConfig, serve

FABRIC = Path(__file__).resolve().parents[2] / "examples" / "fabrics" / "three-site.yaml"


def config(tmp_path: Path, **kw: object) -> ServerConfig:
    return ServerConfig(fabric=load_fabric(FABRIC), state_dir=tmp_path / "state", **kw)  # type: ignore[arg-type]


def test_a_port_in_use_is_unavailable(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(UnavailableError, match=f"port {port} on 127.0.0.1 is already in use"):
            serve(config(tmp_path, port=port))
    assert not (tmp_path / "state").exists()  # nothing was created


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"log_level": "loud"}, "unknown log level 'loud'"),
        ({"db_url": "oracle://x"}, "supports SQLite and PostgreSQL"),
    ],
)
def test_bad_settings_are_refused_before_serving(
    tmp_path: Path, kw: dict[str, object], words: str
) -> None:
    with pytest.raises(ValidationError, match=words):
        serve(config(tmp_path, port=0, **kw))

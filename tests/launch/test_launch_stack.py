"""Starting the stack's server: the flags a caller adds reach the server's own command line
(the lab passes ``--relay-share`` this way), and a flag the server refuses is reported with
the server's log rather than waited on."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from onecluster.errors import BackendError
from onecluster.launch import Launcher, free_port, start_server, wait_server
from onecluster.process import cmdline

FABRIC = Path(__file__).resolve().parents[2] / "examples" / "fabrics" / "three-site.yaml"


def test_extra_flags_reach_the_server_and_it_starts_with_them(tmp_path: Path) -> None:
    with Launcher(tmp_path / "logs", grace_s=5) as launcher:
        server = start_server(
            launcher,
            python=sys.executable,
            state_dir=tmp_path / "state",
            fabric=FABRIC,
            host="127.0.0.1",
            port=free_port("127.0.0.1"),
            extra=["--relay-share", "1", "--bulk-share", "0.8"],
        )
        wait_server(launcher, server, timeout_s=60)
        argv = [a.decode() for a in cmdline(server.process.pid)]
        assert argv[-4:] == ["--relay-share", "1", "--bulk-share", "0.8"]


def test_a_flag_the_server_refuses_is_an_error_naming_its_log(tmp_path: Path) -> None:
    with Launcher(tmp_path / "logs", grace_s=5) as launcher:
        server = start_server(
            launcher,
            python=sys.executable,
            state_dir=tmp_path / "state",
            fabric=FABRIC,
            host="127.0.0.1",
            port=free_port("127.0.0.1"),
            extra=["--relay-share", "2"],  # a share is at most 1
        )
        with pytest.raises(BackendError, match="server") as caught:
            wait_server(launcher, server, timeout_s=60)
        assert "relay-share" in (caught.value.hint or "")


def test_an_agent_s_de_identification_key_is_made_once_private_and_kept(tmp_path: Path) -> None:
    from onecluster.cli._agent import _deid_key
    from onecluster.launch._stack import deid_key_file

    key = deid_key_file(tmp_path / "agent")
    assert key.stat().st_mode & 0o777 == 0o600
    first = key.read_bytes()
    assert deid_key_file(tmp_path / "agent").read_bytes() == first  # kept across restarts
    assert _deid_key(key, None) == first.strip()
    assert _deid_key(None, None) is None  # no key: this site cannot be an export's source

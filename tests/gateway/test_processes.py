"""Two ``onecluster gateway serve`` processes on one database, in front of the **fake**
upstream (``onecluster gateway fake-upstream``), set up through the CLI as an admin would:
a limit is shared, not multiplied by the number of processes; revocation reaches both; the
month's bill (``onecluster report llm``) is the sum of the usage the upstream reported."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from harness import PROVIDER_KEYS, gateway_yaml, overlapping_calls

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "onecluster.cli"]
HELLO = [{"role": "user", "content": "say hello to the whole team"}]


def _wait_port(path: Path, proc: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        if proc.poll() is not None:
            msg = f"{proc.args} exited with {proc.returncode}"
            raise RuntimeError(msg)
        time.sleep(0.05)
    msg = f"{proc.args} did not start"
    raise RuntimeError(msg)


class Fleet:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[object] = []
        self.db = base / "gateway.db"
        self.secret = base / "gateway.secret"
        self.config = base / "gateway.yaml"

    def start(self, *args: str, name: str) -> int:
        ready = self.base / f"{name}.port"
        log = (self.base / f"{name}.log").open("wb")
        self.logs.append(log)
        proc = subprocess.Popen(
            [*CLI, *args, "--port", "0", "--ready-file", str(ready)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.procs.append(proc)
        return _wait_port(ready, proc)

    def cli(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [*CLI, "--state-dir", str(self.base), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for log in self.logs:
            log.close()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Fleet, list[str]]]:
    tmp_path = tmp_path_factory.mktemp("fleet")
    fleet = Fleet(tmp_path)
    try:
        upstream = fleet.start("gateway", "fake-upstream", name="fake")
        fleet.config.write_text(gateway_yaml(f"http://127.0.0.1:{upstream}"))
        for name, key in PROVIDER_KEYS.items():
            fleet.cli(
                "gateway",
                "provider-key",
                "set",
                name,
                "--config",
                str(fleet.config),
                stdin=key + "\n",
            )
        urls = []
        for i in range(2):
            port = fleet.start(
                "--state-dir",
                str(tmp_path),
                "gateway",
                "serve",
                "--config",
                str(fleet.config),
                name=f"gw{i}",
            )
            urls.append(f"http://127.0.0.1:{port}/v1")
        yield fleet, urls
    finally:
        fleet.stop()
    for i in range(2):
        log = (tmp_path / f"gw{i}.log").read_text()
        assert all(secret not in log for secret in PROVIDER_KEYS.values())


def _issue(fleet: Fleet, team: str, *extra: str) -> str:
    out = fleet.cli(
        "gateway", "keys", "issue", "--config", str(fleet.config), "--team", team, *extra
    )
    return out.strip()


def _away_from_a_minute_end() -> None:
    """The processes use the real clock: do not start a per-minute test in its last seconds."""
    second = time.time() % 60
    if second > 45:
        time.sleep(61 - second)


def test_a_limit_is_shared_by_every_process_not_multiplied(fleet: tuple[Fleet, list[str]]) -> None:
    admin, urls = fleet
    key = _issue(admin, "interns")  # tier free: 5 requests a minute
    _away_from_a_minute_end()
    got = asyncio.run(overlapping_calls(urls, key, 16, delay_ms=300))
    assert got.count("ok") == 5
    tight = _issue(admin, "vision", "--rpm", "7")  # a key's own, stricter limit
    got = asyncio.run(overlapping_calls(urls, tight, 16, delay_ms=300))
    assert got.count("ok") == 7


def test_revoking_a_key_stops_it_on_every_process(fleet: tuple[Fleet, list[str]]) -> None:
    admin, urls = fleet
    key = _issue(admin, "vision")
    clients = [openai.OpenAI(base_url=u, api_key=key, max_retries=0) for u in urls]
    for c in clients:
        c.chat.completions.create(model="gpt-fake", messages=HELLO)
    listed = admin.cli("gateway", "keys", "list", "--team", "vision")
    key_id = key.split("_")[1]
    assert key_id in listed and key not in listed
    admin.cli("gateway", "keys", "revoke", key_id)
    time.sleep(1.5)  # the key caches refresh every second
    for c in clients:
        with pytest.raises(openai.AuthenticationError):
            c.chat.completions.create(model="gpt-fake", messages=HELLO)
        c.close()


def test_the_monthly_bill_is_the_sum_of_the_upstreams_usage(
    fleet: tuple[Fleet, list[str]],
) -> None:
    admin, urls = fleet
    keys = {team: _issue(admin, team) for team in ("speech", "legal", "research")}
    reported: dict[str, list[int]] = {team: [0, 0] for team in keys}
    clients: list[openai.OpenAI] = []
    for i in range(24):
        team = list(keys)[i % 3]
        client = openai.OpenAI(base_url=urls[i % 2], api_key=keys[team], max_retries=0)
        clients.append(client)
        if i % 4 == 0:
            stream = client.chat.completions.create(
                model="gpt-fake",
                messages=HELLO,
                stream=True,
                max_tokens=1 + i % 8,
                stream_options={"include_usage": True},
            )
            usage = next(c.usage for c in stream if c.usage)
        else:
            usage = client.chat.completions.create(
                model="gpt-fake",
                messages=[{"role": "user", "content": "word " * i}],
                max_tokens=1 + i % 8,
            ).usage
        assert usage is not None
        reported[team][0] += usage.prompt_tokens
        reported[team][1] += usage.completion_tokens
    for client in clients:
        client.close()
    month = time.strftime("%Y-%m", time.gmtime())
    bill = json.loads(admin.cli("report", "llm", "--month", month, "--format", "json"))
    lines = {line["team"]: line for line in bill["lines"]}
    assert set(keys) <= set(lines)  # the other tests of this module billed other teams
    for team, (prompt, completion) in reported.items():
        line = lines[team]
        assert (line["prompt_tokens"], line["completion_tokens"]) == (prompt, completion)
        assert line["calls"] == 8 and line["estimated_calls"] == 0
        # $1/M prompt, $2/M completion: cost is exact to the nano-dollar
        assert line["cost"] == f"{(prompt * 1 + completion * 2) / 1_000_000:.6f}"
    table = admin.cli("report", "llm", "--month", month)
    assert "total:" in table

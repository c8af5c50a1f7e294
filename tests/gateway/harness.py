"""Helpers for the gateway's tests: servers on real loopback sockets in background threads,
a gateway configuration around the fake upstream, and a fixed clock.

A real socket (not ``httpx.ASGITransport``, which buffers server-sent events) is what the
official ``openai`` SDK talks to, as a user's program would.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import openai
import pytest
from aiohttp import web

from onecluster.clock import ManualClock
from onecluster.gateway import FakeUpstream, Gateway, GatewayStore, KeyLimits, SecretBox

ROOT = Path(__file__).resolve().parents[2]
SHARED_TOKENIZERS = ROOT.parent / "shared" / "data" / "tokenizers"

# 2026-12-15 10:00:05 UTC: far from a minute's end, so no window turns over mid-test
# unless a test moves the clock on purpose.
T0 = 1_797_328_805.0


class ServerThread:
    """An aiohttp application served on 127.0.0.1 from its own thread and event loop."""

    def __init__(self, make_app: Callable[[], web.Application]) -> None:
        self._make_app = make_app
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)

    def start(self) -> ServerThread:
        self._thread.start()
        if not self._ready.wait(30):
            msg = "server did not start"
            raise RuntimeError(msg)
        if self._error is not None:
            raise self._error
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._start())
        except BaseException as exc:  # noqa: BLE001  (re-raised in the test's thread)
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()

    async def _start(self) -> None:
        self._runner = web.AppRunner(
            self._make_app(), access_log=None, handle_signals=False, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    def call(self, fn: Callable[[], object]) -> object:
        """Run ``fn`` on the server's loop and wait for it."""

        async def run() -> object:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(30)

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()


def gateway_yaml(upstream_url: str, *, tokyo_proxy: str | None = None) -> str:
    """Four tiers and five teams around the fake upstream at ``upstream_url``; the Tokyo
    egress node reaches it through ``tokyo_proxy`` when given."""
    second = upstream_url
    proxy = f", proxy: {tokyo_proxy!r}" if tokyo_proxy else ""
    return f"""
version: 1
currency: USD
egress:
  - {{name: sg-egress, site: singapore}}
  - {{name: tokyo-egress, site: tokyo{proxy}}}
upstreams:
  - {{name: openai-sg, base_url: "{upstream_url}/v1", egress: sg-egress, timeout_s: 2}}
  - {{name: azure-tokyo, base_url: "{second}/v1", egress: tokyo-egress, auth: api-key,
      timeout_s: 2}}
  - {{name: broken, base_url: "{upstream_url}/v1", egress: sg-egress, timeout_s: 0.5}}
  - {{name: keyless, base_url: "{upstream_url}/v1", egress: sg-egress}}
models:
  - name: gpt-fake
    region: us
    max_output_tokens: 64
    input_price: 1.0
    output_price: 2.0
    deployments: [{{upstream: openai-sg, model: fake-gpt}}]
  - name: gpt-fallback
    region: us
    max_output_tokens: 64
    input_price: 1.0
    output_price: 2.0
    deployments:
      - {{upstream: broken, model: fake-fail-500}}
      - {{upstream: keyless}}
      - {{upstream: azure-tokyo, model: fake-gpt}}
  - name: gpt-hang
    region: us
    input_price: 1.0
    deployments: [{{upstream: broken, model: fake-hang}}]
  - name: gpt-cut
    region: us
    max_output_tokens: 64
    input_price: 1.0
    output_price: 2.0
    deployments: [{{upstream: openai-sg, model: fake-cut}}]
  - name: gpt-malformed
    region: us
    max_output_tokens: 64
    input_price: 1.0
    output_price: 2.0
    deployments: [{{upstream: openai-sg, model: fake-malformed}}]
  - name: gpt-redirect
    region: us
    input_price: 1.0
    deployments: [{{upstream: azure-tokyo, model: fake-redirect}}]
  - name: gpt-badkey
    region: us
    input_price: 1.0
    deployments: [{{upstream: openai-sg, model: fake-fail-401}}]
  - name: qwen-fake
    region: cn
    kind: completion
    max_output_tokens: 64
    input_price: 0.5
    output_price: 0.5
    deployments: [{{upstream: openai-sg, model: fake-qwen}}]
  - name: embed-fake
    region: us
    kind: embedding
    input_price: 0.1
    deployments: [{{upstream: openai-sg, model: fake-embed}}]
tiers:
  - {{name: free, rpm: 5, tpm: 200, daily_spend: 1, monthly_spend: 10, models: [gpt-fake]}}
  - {{name: standard, rpm: 60, tpm: 100000, daily_spend: 10, monthly_spend: 100,
      models: [gpt-fake, qwen-fake, embed-fake]}}
  - {{name: pro, rpm: 100000, tpm: 100000000, daily_spend: 1000, monthly_spend: 10000,
      models: ["*"]}}
  - {{name: capped, rpm: 100000, tpm: 100000000, daily_spend: 0.002, monthly_spend: 0.005,
      models: [gpt-fake]}}
teams:
  - {{name: vision, tier: pro}}
  - {{name: speech, tier: standard}}
  - {{name: interns, tier: free}}
  - {{name: research, tier: capped}}
  - {{name: legal, tier: pro, audit_bodies: true}}
"""


PROVIDER_KEYS = {
    "openai-sg": "sk-provider-openai-SECRET123456",
    "azure-tokyo": "azure-provider-SECRET456789",
    "broken": "sk-provider-broken-SECRET789012",
}


@dataclass
class Running:
    """A gateway under test: its URL, clock, store (a connection of the test's own) and fake."""

    url: str
    clock: ManualClock
    store: GatewayStore
    fake: FakeUpstream
    gateway: Gateway
    server: ServerThread
    clients: list[openai.OpenAI] = field(default_factory=list)

    def key(self, team: str, limits: KeyLimits | None = None, name: str = "test") -> str:
        return self.store.issue_key(team, name, limits or KeyLimits(), T0).secret

    def client(self, key: str) -> openai.OpenAI:
        """An SDK client (closed when the test ends)."""
        client = openai.OpenAI(base_url=f"{self.url}/v1", api_key=key, max_retries=0, timeout=20)
        self.clients.append(client)
        return client

    def close(self) -> None:
        for client in self.clients:
            client.close()
        self.store.close()
        self.server.stop()

    def async_client(self, key: str) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=f"{self.url}/v1", api_key=key, max_retries=0, timeout=20)


def seal_provider_keys(db: str | Path, secret: Path) -> None:
    box = SecretBox.open(secret)
    store = GatewayStore(db)
    for upstream, key in PROVIDER_KEYS.items():
        store.set_provider_key(upstream, box.seal(key), T0)
    store.close()


HELLO = [{"role": "user", "content": "say hello to the whole team"}]


def wait_until(check: Callable[[], object], what: str, timeout: float = 10.0) -> None:
    """Until ``check()`` is true; fail after ``timeout`` seconds, naming ``what``."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not reached in {timeout} s")
        time.sleep(0.02)


async def overlapping_calls(urls: list[str], key: str, n: int, *, delay_ms: int) -> list[str]:
    """``n`` HELLO calls at once (max_tokens=4), spread over the gateways at ``urls`` (their
    ``/v1``), each held ``delay_ms`` at the upstream so all reservations overlap: "ok" or
    "429" per call."""
    clients = [openai.AsyncOpenAI(base_url=u, api_key=key, max_retries=0) for u in urls]

    async def one(i: int) -> str:
        try:
            await clients[i % len(clients)].chat.completions.create(
                model="gpt-fake",
                messages=HELLO,  # type: ignore[arg-type]
                max_tokens=4,
                extra_body={"fake_delay_ms": delay_ms},
            )
        except openai.RateLimitError:
            return "429"
        return "ok"

    try:
        return list(await asyncio.gather(*(one(i) for i in range(n))))
    finally:
        for client in clients:
            await client.close()


CLI = [sys.executable, "-m", "onecluster.cli"]


def wait_port(path: Path, proc: subprocess.Popen[bytes]) -> int:
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
    """Gateway processes (and the fake upstream) started through the CLI, as an admin
    would, each logging to ``<base>/<name>.log``."""

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
        return wait_port(ready, proc)

    def start_upstream(self) -> None:
        """Start the fake upstream, write the configuration around it and seal every
        upstream's provider key, as an admin would."""
        upstream = self.start("gateway", "fake-upstream", name="fake")
        self.config.write_text(gateway_yaml(f"http://127.0.0.1:{upstream}"))
        for name, key in PROVIDER_KEYS.items():
            self.cli(
                "gateway", "provider-key", "set", name, "--config", str(self.config),
                stdin=key + "\n",
            )  # fmt: skip

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """``onecluster --state-dir <base> ARGS``, to its end."""
        return subprocess.run(
            [*CLI, "--state-dir", str(self.base), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def cli(self, *args: str, stdin: str | None = None) -> str:
        """What ``onecluster ARGS`` printed, which must succeed."""
        done = self.run(*args, stdin=stdin)
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

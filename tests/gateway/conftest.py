"""Fixtures: the **fake** upstream and a gateway in front of it, both on real sockets, a
fixed clock, provider keys sealed in the gateway's store, and team keys issued per test."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import openai
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from harness import SHARED_TOKENIZERS, T0, ServerThread, gateway_yaml

from onecluster.clock import ManualClock
from onecluster.gateway import (
    FakeUpstream,
    Gateway,
    GatewaySettings,
    GatewayStore,
    KeyLimits,
    SecretBox,
    build_app,
    build_fake_upstream,
    parse_gateway_config,
)

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

    def key(self, team: str, limits: KeyLimits | None = None, name: str = "test") -> str:
        return self.store.issue_key(team, name, limits or KeyLimits(), T0).secret

    def client(self, key: str) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=key, max_retries=0, timeout=20)

    def async_client(self, key: str) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=f"{self.url}/v1", api_key=key, max_retries=0, timeout=20)


def seal_provider_keys(db: Path, secret: Path) -> None:
    box = SecretBox.open(secret)
    store = GatewayStore(db)
    for upstream, key in PROVIDER_KEYS.items():
        store.set_provider_key(upstream, box.seal(key), T0)
    store.close()


@pytest.fixture
def tokenizers(monkeypatch: pytest.MonkeyPatch) -> Path | None:
    """tiktoken's encodings from ../shared/data/tokenizers where they exist (else estimates)."""
    if not SHARED_TOKENIZERS.is_dir():
        return None
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(SHARED_TOKENIZERS))
    return SHARED_TOKENIZERS


@pytest.fixture
def fake() -> Iterator[tuple[ServerThread, FakeUpstream]]:
    seen = FakeUpstream()
    server = ServerThread(lambda: build_fake_upstream(seen)).start()
    yield server, seen
    server.stop()


@pytest.fixture
def running(
    tmp_path: Path, fake: tuple[ServerThread, FakeUpstream], tokenizers: Path | None
) -> Iterator[Running]:
    upstream, seen = fake
    config = parse_gateway_config(gateway_yaml(upstream.url))
    settings = GatewaySettings(
        db_path=tmp_path / "gateway.db",
        secret_path=tmp_path / "gateway.secret",
        tokenizers_dir=tokenizers,
    )
    seal_provider_keys(settings.db_path, settings.secret_path)
    clock = ManualClock(T0)
    gateway = Gateway.open(config, settings, clock=clock)
    server = ServerThread(lambda: build_app(gateway)).start()
    store = GatewayStore(settings.db_path)
    yield Running(server.url, clock, store, seen, gateway, server)
    store.close()
    server.stop()


def dollars(nano: int) -> Decimal:
    return Decimal(nano) / 1_000_000_000

"""Fixtures: the **fake** upstream and a gateway in front of it, both on real sockets, a
fixed clock, provider keys sealed in the gateway's store, and team keys issued per test."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from harness import (
    SHARED_TOKENIZERS,
    T0,
    Running,
    ServerThread,
    gateway_yaml,
    seal_provider_keys,
)

from onecluster.clock import ManualClock
from onecluster.gateway import (
    FakeUpstream,
    Gateway,
    GatewaySettings,
    GatewayStore,
    build_app,
    build_fake_upstream,
    parse_gateway_config,
)


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

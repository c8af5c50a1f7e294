"""Fixtures: the **fake** upstream and a gateway in front of it, both on real sockets, a
fixed clock, provider keys sealed in the gateway's store, and team keys issued per test."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
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
def make_gateway(
    tmp_path: Path, fake: tuple[ServerThread, FakeUpstream], tokenizers: Path | None
) -> Iterator[Callable[..., Running]]:
    """Start a gateway on the configuration ``gateway_yaml`` gives for the fake's URL."""
    started: list[Running] = []

    def start(yaml_text: str, db_url: str | None = None) -> Running:
        seen = fake[1]
        config = parse_gateway_config(yaml_text)
        base = tmp_path / f"gw{len(started)}"
        settings = GatewaySettings(
            db=db_url or base / "gateway.db",
            secret_path=base / "gateway.secret",
            tokenizers_dir=tokenizers,
        )
        seal_provider_keys(settings.db, settings.secret_path)
        clock = ManualClock(T0)
        gateway = Gateway.open(config, settings, clock=clock)
        server = ServerThread(lambda: build_app(gateway)).start()
        store = GatewayStore(settings.db)
        started.append(Running(server.url, clock, store, seen, gateway, server))
        return started[-1]

    yield start
    for run in started:
        run.close()


@pytest.fixture
def running(
    make_gateway: Callable[[str], Running], fake: tuple[ServerThread, FakeUpstream]
) -> Running:
    return make_gateway(gateway_yaml(fake[0].url))

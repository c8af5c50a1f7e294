"""``onecluster gateway``: one OpenAI-compatible door to every LLM provider.

Team keys → the team's tier (rpm, tpm, daily and monthly spend, allowed models) → the
model's egress node and upstream → the provider's own ``usage`` → one ledger row and one
audit row per call.  ``docs/gateway.md`` describes it; the pure quota arithmetic is in
:mod:`onecluster.gateway._quota`.
"""

from onecluster.gateway._app import build_app
from onecluster.gateway._config import (
    NANO,
    GatewayConfig,
    KeyLimits,
    ModelEntry,
    TeamPolicy,
    Tier,
    load_gateway_config,
    parse_gateway_config,
)
from onecluster.gateway._gateway import Gateway, GatewaySettings
from onecluster.gateway._keys import IssuedKey, KeyRecord, SecretBox
from onecluster.gateway._records import BillLine, CallRecord
from onecluster.gateway._redact import redact
from onecluster.gateway._serve import serve_fake_upstream, serve_gateway
from onecluster.gateway._store import GatewayStore
from onecluster.gateway._tokens import ENCODING_FILES, TokenEstimator
from onecluster.gateway.fake_upstream import FakeUpstream, build_fake_upstream

__all__ = [
    "ENCODING_FILES",
    "NANO",
    "BillLine",
    "CallRecord",
    "FakeUpstream",
    "Gateway",
    "GatewayConfig",
    "GatewaySettings",
    "GatewayStore",
    "IssuedKey",
    "KeyLimits",
    "KeyRecord",
    "ModelEntry",
    "SecretBox",
    "TeamPolicy",
    "Tier",
    "TokenEstimator",
    "build_app",
    "build_fake_upstream",
    "load_gateway_config",
    "parse_gateway_config",
    "redact",
    "serve_fake_upstream",
    "serve_gateway",
]

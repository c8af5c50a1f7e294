"""Pure helpers: PII redaction, the wire format, token estimates, key formats, scrubbing."""

from __future__ import annotations

from pathlib import Path

import pytest

from onecluster.errors import AuthError, ValidationError
from onecluster.gateway import SecretBox, TokenEstimator, redact
from onecluster.gateway._keys import key_id_of, new_key
from onecluster.gateway._providers import scrub
from onecluster.gateway._wire import Endpoint, parse_event, parse_request


def test_redaction_replaces_pii_and_keeps_look_alikes() -> None:
    text = (
        "mail li.wei@example.cn, call 13812345678 or +65 6123 4567, ID 11010519491231002X, "
        "card 6212 2612 0200 0000 001, server 10.2.3.4, order 1234567890123, tel 010-62345678"
    )
    out = redact(text)
    for gone in (
        "li.wei@",
        "13812345678",
        "6123 4567",
        "11010519491231002X",
        "10.2.3.4",
        "6212 2612 0200 0000 001",
        "62345678",
    ):
        assert gone not in out
    assert {"[EMAIL]", "[PHONE]", "[ID]", "[IP]", "[CARD]"} <= set(out.replace(",", " ").split())
    assert "order 1234567890123" in out  # fails Luhn: not a card
    assert redact("ID 110105194912310021") == "ID 110105194912310021"  # wrong check digit


def test_redaction_catches_a_luhn_valid_card() -> None:
    assert redact("pay with 4111 1111 1111 1111 now") == "pay with [CARD] now"


def test_requests_are_validated_per_endpoint() -> None:
    req = parse_request(
        Endpoint.CHAT, b'{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}'
    )
    assert req.stream and not req.client_wants_usage
    assert b'"include_usage":true' in req.upstream_body("up-m")
    assert b'"model":"up-m"' in req.upstream_body("up-m")
    for endpoint, body in (
        (Endpoint.CHAT, b'{"model":"m","messages":[{"content":"no role"}]}'),
        (Endpoint.COMPLETIONS, b'{"model":"m","prompt":3}'),
        (Endpoint.EMBEDDINGS, b'{"model":"m","input":"x","stream":true}'),
        (Endpoint.CHAT, b'{"model":"m","messages":[{"role":"user"}],"n":0}'),
        (Endpoint.CHAT, b'{"model":"m","messages":[{"role":"user"}],"max_tokens":true}'),
    ):
        with pytest.raises(ValidationError):
            parse_request(endpoint, body)
    assert parse_request(Endpoint.EMBEDDINGS, b'{"model":"m","input":[[1,2],[3]]}').model == "m"


def test_stream_events_are_read_for_usage_and_text() -> None:
    event = parse_event(b'data: {"choices":[{"delta":{"content":"hi"}}]}')
    assert event.text == "hi" and event.usage is None
    usage = parse_event(b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}')
    assert usage.usage_only and usage.usage is not None and usage.usage.completion_tokens == 2
    assert parse_event(b"data: [DONE]").done
    assert parse_event(b"data: {broken").malformed
    assert parse_event(b": keep-alive comment").raw == b": keep-alive comment"


def test_the_byte_estimate_errs_on_the_safe_side() -> None:
    estimate = TokenEstimator({})
    assert not estimate.exact("o200k_base")
    assert estimate.count("o200k_base", "hello world") == 4  # 11 bytes / 3
    assert estimate.chat("o200k_base", [{"role": "user", "content": "hi"}]) == 3 + 4 + 2 + 1


def test_tiktoken_counts_exactly_with_the_encodings(tokenizers: Path | None) -> None:
    if tokenizers is None:
        pytest.skip("../shared/data/tokenizers is not here; the byte estimate is tested above")
    estimate = TokenEstimator.load(tokenizers)
    assert estimate.exact("o200k_base") and estimate.exact("cl100k_base")
    assert estimate.count("o200k_base", "hello world") == 2


def test_keys_and_the_secret_box(tmp_path: Path) -> None:
    key_id, key = new_key()
    assert key_id_of(key) == key_id and key_id_of("sk-other") is None
    box = SecretBox.open(tmp_path / "secret")
    assert (tmp_path / "secret").stat().st_mode & 0o777 == 0o600
    sealed = box.seal("sk-provider")
    assert b"sk-provider" not in sealed and box.unseal(sealed) == "sk-provider"
    with pytest.raises(AuthError):
        SecretBox.open(tmp_path / "other").unseal(sealed)
    with pytest.raises(ValidationError):
        SecretBox(b"short")


def test_scrub_removes_secrets_and_key_shapes() -> None:
    out = scrub("bad key sk-abc***xyz9 and SECRETVALUE", ("SECRETVALUE",))
    assert "SECRETVALUE" not in out and "sk-abc" not in out

"""The gateway configuration: the example loads; every mistake is named; money is exact."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from harness import ROOT, gateway_yaml
from typer.testing import CliRunner

from onecluster.cli import build_app
from onecluster.errors import ValidationError
from onecluster.fabric import load_fabric
from onecluster.gateway import KeyLimits, load_gateway_config, parse_gateway_config


def test_the_example_and_the_test_configurations_load() -> None:
    config = load_gateway_config(ROOT / "examples" / "gateway.yaml")
    assert len(config.tiers) == 4
    model = config.model("gpt-4o-mini")
    assert model is not None
    assert (model.input_nano_per_token, model.output_nano_per_token) == (150, 600)
    assert parse_gateway_config(gateway_yaml("http://127.0.0.1:1")).team("legal") is not None


EXTRA_TIER = "{name: x, rpm: 1, tpm: 1, daily_spend: 1, monthly_spend: 1, models: ['*']}"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            (
                "tiers:\n",
                f"tiers:\n  - {EXTRA_TIER}\n",
            ),
            "tiers",
        ),
        (("{upstream: openai-sg, model: fake-gpt}", "{upstream: nowhere}"), "upstream 'nowhere'"),
        (("egress: tokyo-egress, auth", "egress: mars, auth"), "egress node 'mars'"),
        (("models: [gpt-fake]}", "models: [gpt-5]}"), "gpt-5"),
        (("{name: vision, tier: pro}", "{name: vision, tier: platinum}"), "platinum"),
        (("input_price: 0.1", "input_price: 0.0000000001"), "decimal places"),
        (("rpm: 5,", "rpm: -5,"), "rpm"),
        (("currency: USD", "currency: dollars"), "currency"),
        (("version: 1", "version: 1\nsurprise: true"), "surprise"),
    ],
)
def test_mistakes_are_named(change: tuple[str, str], message: str) -> None:
    text = gateway_yaml("http://127.0.0.1:1")
    assert change[0] in text
    with pytest.raises(ValidationError) as bad:
        parse_gateway_config(text.replace(change[0], change[1], 1))
    assert message in bad.value.message


def test_unreadable_files_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="does not exist"):
        load_gateway_config(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("egress: [")
    with pytest.raises(ValidationError, match="not valid YAML"):
        load_gateway_config(tmp_path / "bad.yaml")


def test_key_limits_stay_within_the_tier() -> None:
    config = parse_gateway_config(gateway_yaml("http://127.0.0.1:1"))
    free = config.tier("free")
    KeyLimits(rpm=5, daily_spend=Decimal("0.5")).check_within(free)
    with pytest.raises(ValidationError, match="cannot exceed"):
        KeyLimits(rpm=6).check_within(free)
    with pytest.raises(ValidationError, match="allow-list"):
        KeyLimits(models=("gpt-cut",)).check_within(free)


FABRIC = ROOT / "examples" / "fabrics" / "three-site.yaml"


def test_the_example_matches_its_fabric() -> None:
    config = load_gateway_config(ROOT / "examples" / "gateway.yaml")
    config.check_fabric(load_fabric(FABRIC))  # every egress site and team is the fabric's


def test_egress_sites_and_teams_the_fabric_lacks_are_named_with_the_known_ones() -> None:
    text = (ROOT / "examples" / "gateway.yaml").read_text()
    text = text.replace("site: tokyo", "site: osaka").replace("name: speech", "name: speeech")
    config = parse_gateway_config(text)
    with pytest.raises(ValidationError) as bad:
        config.check_fabric(load_fabric(FABRIC))
    assert "egress node 'tokyo-egress' is at site 'osaka'" in bad.value.message
    assert "team 'speeech' not in fabric" in bad.value.message
    assert bad.value.hint is not None
    assert "known sites: shanghai, singapore, tokyo" in bad.value.hint
    assert "known teams: llm, vision, speech" in bad.value.hint


def test_gateway_serve_refuses_a_config_that_does_not_match_the_fabric(tmp_path: Path) -> None:
    text = (ROOT / "examples" / "gateway.yaml").read_text().replace("name: llm", "name: lm")
    config = tmp_path / "gw.yaml"
    config.write_text(text)
    args = ["--state-dir", str(tmp_path), "gateway", "serve", "--config", str(config)]
    result = CliRunner().invoke(build_app(), [*args, "--fabric", str(FABRIC), "--port", "0"])
    assert result.exit_code == 2, result.output
    assert "does not match fabric file" in result.stderr
    assert "team 'lm' not in fabric three-site" in result.stderr
    assert "known teams: llm, vision, speech" in result.stderr
    assert not (tmp_path / "gateway.db").exists()  # refused before anything was made

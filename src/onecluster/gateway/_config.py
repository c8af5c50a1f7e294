"""The gateway's configuration file (YAML): egress nodes, upstreams, the model catalogue, the
four tiers and the teams on them.  Loaded once in ``main``, validated whole, frozen.

Money is entered in the bill's currency as decimals (``0.15`` per million tokens, ``50`` a
month) and held as integer *nano-units* (10⁻⁹ of the currency), so every sum is exact.  The
format is documented in ``docs/gateway.md``; ``examples/gateway.yaml`` is a complete file.
"""

from __future__ import annotations

import functools
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Literal

import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field

from onecluster.errors import ValidationError
from onecluster.model import Fabric

__all__ = [
    "NANO",
    "Deployment",
    "EgressNode",
    "GatewayConfig",
    "KeyLimits",
    "ModelEntry",
    "TeamPolicy",
    "Tier",
    "Upstream",
    "load_gateway_config",
    "parse_gateway_config",
    "to_nano",
]

NANO = 1_000_000_000
"""Nano-units per unit of the bill's currency."""

TIER_COUNT = 4

_Name = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,62}$")]


def to_nano(amount: Decimal) -> int:
    """``amount`` of currency as integer nano-units; more than 9 decimals is an error."""
    scaled = amount * NANO
    if scaled != scaled.to_integral_value():
        msg = f"{amount} has more than 9 decimal places; money is exact to 10⁻⁹"
        raise ValidationError(msg)
    return int(scaled)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EgressNode(_Frozen):
    """Where the gateway's upstream connections leave the private network.

    ``proxy`` is the node's HTTP(S) forward proxy; ``None`` means this gateway is at the node
    and connects directly.
    """

    name: _Name
    site: str
    proxy: str | None = None


class Upstream(_Frozen):
    """One provider account reached through one egress node.

    ``auth`` says how the provider key is sent: ``bearer`` (``Authorization: Bearer``, OpenAI
    and most OpenAI-compatible providers) or ``api-key`` (Azure OpenAI's ``api-key`` header).
    """

    name: _Name
    base_url: Annotated[str, Field(pattern=r"^https?://")]
    egress: str
    auth: Literal["bearer", "api-key"] = "bearer"
    timeout_s: Annotated[float, Field(gt=0)] = 60.0
    """Seconds to wait for the first byte of the upstream's answer before it counts as hung."""


class Deployment(_Frozen):
    """A model as one upstream serves it (``model`` is the upstream's own name for it)."""

    upstream: str
    model: str | None = None


class ModelEntry(_Frozen):
    """A catalogue entry: the name clients use, where it is served and what it costs.

    ``deployments`` are tried in order; the next is tried only while nothing has been sent
    to the client.  Prices are per million tokens in the bill's currency.
    """

    name: str
    region: str
    kind: Literal["chat", "completion", "embedding"] = "chat"
    tokenizer: Literal["o200k_base", "cl100k_base"] = "o200k_base"
    max_output_tokens: Annotated[int, Field(gt=0)] = 16_384
    input_price: Annotated[Decimal, Field(ge=0)]
    output_price: Annotated[Decimal, Field(ge=0)] = Decimal(0)
    deployments: Annotated[tuple[Deployment, ...], Field(min_length=1)]

    @functools.cached_property
    def input_nano_per_token(self) -> int:
        """Nano-units one prompt token costs (price per million ÷ 10⁶, exactly)."""
        return to_nano(self.input_price / 1_000_000)

    @functools.cached_property
    def output_nano_per_token(self) -> int:
        """Nano-units one completion token costs."""
        return to_nano(self.output_price / 1_000_000)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> int:
        """What the tokens cost, in nano-units (exact)."""
        return (
            prompt_tokens * self.input_nano_per_token
            + completion_tokens * self.output_nano_per_token
        )


class Tier(_Frozen):
    """A reusable quota class: per-minute rates, daily and monthly spend, allowed models.

    ``models`` may hold ``"*"`` (every model in the catalogue).
    """

    name: _Name
    rpm: Annotated[int, Field(gt=0)]
    tpm: Annotated[int, Field(gt=0)]
    daily_spend: Annotated[Decimal, Field(ge=0)]
    monthly_spend: Annotated[Decimal, Field(ge=0)]
    models: Annotated[tuple[str, ...], Field(min_length=1)]

    def allows(self, model: str) -> bool:
        """Whether the tier's allow-list admits ``model``."""
        return "*" in self.models or model in self.models


class KeyLimits(_Frozen):
    """A key's own limits: each may only be stricter than its team's tier; ``None`` = tier's."""

    rpm: Annotated[int, Field(gt=0)] | None = None
    tpm: Annotated[int, Field(gt=0)] | None = None
    daily_spend: Annotated[Decimal, Field(ge=0)] | None = None
    monthly_spend: Annotated[Decimal, Field(ge=0)] | None = None
    models: tuple[str, ...] | None = None

    @property
    def is_empty(self) -> bool:
        """True when the key adds nothing to its tier."""
        return all(getattr(self, f) is None for f in type(self).model_fields)

    def check_within(self, tier: Tier) -> None:
        """:class:`ValidationError` unless every override is at most the tier's value."""
        for field in ("rpm", "tpm", "daily_spend", "monthly_spend"):
            mine = getattr(self, field)
            if mine is not None and mine > getattr(tier, field):
                msg = f"a key's {field} ({mine}) cannot exceed its team's tier {tier.name} "
                msg += f"({getattr(tier, field)})"
                raise ValidationError(msg)
        if self.models is not None:
            outside = [m for m in self.models if not tier.allows(m)]
            if outside:
                msg = f"models {outside} are not on tier {tier.name}'s allow-list"
                raise ValidationError(msg)


class TeamPolicy(_Frozen):
    """A team's place in the gateway: its tier and whether its prompts are kept in the audit.

    With ``audit_bodies`` the audit row keeps the prompt and the response, PII redacted
    unless ``redact`` is off.
    """

    name: str
    tier: str
    audit_bodies: bool = False
    redact: bool = True


class GatewayConfig(_Frozen):
    """The whole gateway configuration, checked for cross-references on load."""

    version: Literal[1] = 1
    currency: Annotated[str, Field(pattern=r"^[A-Z]{3}$")] = "USD"
    egress: Annotated[tuple[EgressNode, ...], Field(min_length=1)]
    upstreams: Annotated[tuple[Upstream, ...], Field(min_length=1)]
    models: Annotated[tuple[ModelEntry, ...], Field(min_length=1)]
    tiers: Annotated[tuple[Tier, ...], Field(min_length=TIER_COUNT, max_length=TIER_COUNT)]
    teams: tuple[TeamPolicy, ...] = ()

    @pydantic.model_validator(mode="after")
    def _references(self) -> GatewayConfig:
        for kind, names in (
            ("egress node", [e.name for e in self.egress]),
            ("upstream", [u.name for u in self.upstreams]),
            ("model", [m.name for m in self.models]),
            ("tier", [t.name for t in self.tiers]),
            ("team", [t.name for t in self.teams]),
        ):
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                msg = f"{kind} {dup[0]!r} is declared twice"
                raise ValueError(msg)
        egress = {e.name for e in self.egress}
        for up in self.upstreams:
            if up.egress not in egress:
                msg = f"upstream {up.name!r} names egress node {up.egress!r}, which is not declared"
                raise ValueError(msg)
        upstreams = {u.name for u in self.upstreams}
        for model in self.models:
            for dep in model.deployments:
                if dep.upstream not in upstreams:
                    msg = f"model {model.name!r} names upstream {dep.upstream!r}, "
                    msg += "which is not declared"
                    raise ValueError(msg)
            model.input_nano_per_token  # noqa: B018  (prices must be exact to 10⁻⁹)
            model.output_nano_per_token  # noqa: B018
        models = {m.name for m in self.models}
        for tier in self.tiers:
            unknown = [m for m in tier.models if m != "*" and m not in models]
            if unknown:
                msg = f"tier {tier.name!r} allows {unknown[0]!r}, which is not in the catalogue"
                raise ValueError(msg)
            to_nano(tier.daily_spend)
            to_nano(tier.monthly_spend)
        tiers = {t.name for t in self.tiers}
        for team in self.teams:
            if team.tier not in tiers:
                msg = f"team {team.name!r} is on tier {team.tier!r}, which is not declared"
                raise ValueError(msg)
        return self

    def check_fabric(self, fabric: Fabric) -> None:
        """:class:`ValidationError` unless every egress node is at a site of ``fabric`` and
        every team is one of its teams; the message names each that is not, and the hint the
        known ones."""
        unknown_sites = [e for e in self.egress if not fabric.has_site(e.site)]
        unknown_teams = [t.name for t in self.teams if fabric.team(t.name) is None]
        if not unknown_sites and not unknown_teams:
            return
        found = [
            f"egress node {e.name!r} is at site {e.site!r}, which fabric {fabric.name} "
            "does not have"
            for e in unknown_sites
        ]
        if unknown_teams:
            names = ", ".join(repr(t) for t in unknown_teams)
            found.append(
                f"team{'s' * (len(unknown_teams) > 1)} {names} not in fabric {fabric.name}"
            )
        hints = []
        if unknown_sites:
            hints.append(f"known sites: {', '.join(fabric.site_names)}")
        if unknown_teams:
            hints.append(f"known teams: {', '.join(t.name for t in fabric.teams) or 'none'}")
        raise ValidationError("; ".join(found), hint="; ".join(hints))

    def model(self, name: str) -> ModelEntry | None:
        """The catalogue entry called ``name``, or ``None``."""
        return next((m for m in self.models if m.name == name), None)

    def tier(self, name: str) -> Tier:
        """The tier called ``name`` (it exists: checked on load)."""
        return next(t for t in self.tiers if t.name == name)

    def team(self, name: str) -> TeamPolicy | None:
        """The team called ``name``, or ``None`` if the gateway does not know it."""
        return next((t for t in self.teams if t.name == name), None)

    def upstream(self, name: str) -> Upstream:
        """The upstream called ``name`` (it exists: checked on load)."""
        return next(u for u in self.upstreams if u.name == name)

    def egress_node(self, name: str) -> EgressNode:
        """The egress node called ``name`` (it exists: checked on load)."""
        return next(e for e in self.egress if e.name == name)


def parse_gateway_config(text: str, *, source: str = "<gateway config>") -> GatewayConfig:
    """Parse YAML ``text``; :class:`ValidationError` naming the field at fault."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        msg = f"{source} is not valid YAML: {exc}"
        raise ValidationError(msg) from None
    if not isinstance(raw, dict):
        msg = f"{source} must be a mapping with egress, upstreams, models, tiers and teams"
        raise ValidationError(msg)
    try:
        return GatewayConfig.model_validate(raw)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the file"
        msg = f"{source}: {where}: {first['msg']}"
        hint = f"a gateway has exactly {TIER_COUNT} tiers" if "tiers" in where else None
        raise ValidationError(msg, hint=hint or "see docs/gateway.md") from None
    except ValidationError as exc:
        msg = f"{source}: {exc.message}"
        raise ValidationError(msg) from None


def load_gateway_config(path: str | Path) -> GatewayConfig:
    """Read and validate the gateway configuration at ``path``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        msg = f"gateway configuration {p} does not exist"
        raise ValidationError(msg, hint="examples/gateway.yaml is a complete one") from None
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"gateway configuration {p} cannot be read: {exc}"
        raise ValidationError(msg) from exc
    return parse_gateway_config(text, source=str(p))

"""``onecluster gateway``: serve the LLM gateway, manage its team keys and provider keys.

The key commands work on the gateway's database file directly: whoever may write that file
is the gateway's admin (docs/gateway.md).  Secrets are shown once (team keys) or read from
stdin (provider keys), never taken from the command line, where ``ps`` would show them.
"""

from __future__ import annotations

import os
import sys
import time
from decimal import Decimal, InvalidOperation
from pathlib import Path

import typer
from rich.table import Table

from onecluster.cli._config import config_of
from onecluster.cli._log_options import LOG_FORMAT_OPTION, start_logging
from onecluster.cli._render import err_console, out_console
from onecluster.errors import ValidationError

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``gateway`` group (serve, keys, provider-key, fake-upstream) to ``app``."""
    group = typer.Typer(help="The OpenAI-compatible LLM gateway.", no_args_is_help=True)
    group.command("serve")(serve)
    group.command("fake-upstream")(fake_upstream)
    keys = typer.Typer(help="Team keys (admins: whoever may write the database).")
    keys.command("issue")(issue)
    keys.command("revoke")(revoke)
    keys.command("list")(list_keys)
    group.add_typer(keys, name="keys", no_args_is_help=True)
    provider = typer.Typer(help="Provider keys, sealed in the gateway's database.")
    provider.command("set")(set_provider_key)
    group.add_typer(provider, name="provider-key", no_args_is_help=True)
    app.add_typer(group, name="gateway")


def _db(ctx: typer.Context, db: str | None) -> str | Path:
    return db or config_of(ctx).state_dir / "gateway.db"


def _secret(ctx: typer.Context, secret: Path | None) -> Path:
    return secret or config_of(ctx).state_dir / "gateway.secret"


_CONFIG = typer.Option(..., "--config", help="Gateway configuration (YAML).")
_DB = typer.Option(
    None,
    "--db",
    help="Gateway database: a SQLite file, shared by the processes of a host, or a "
    "postgresql:// URL, shared across hosts \\[default: <state-dir>/gateway.db].",
    show_default=False,
)
_SECRET = typer.Option(
    None,
    "--secret",
    help="Secret that seals provider keys \\[default: <state-dir>/gateway.secret, made 0600].",
    show_default=False,
)


def serve(
    ctx: typer.Context,
    *,
    config: Path = _CONFIG,
    db: str | None = _DB,
    secret: Path | None = _SECRET,
    tokenizers: Path | None = typer.Option(
        None,
        "--tokenizers",
        help="Directory of tiktoken's encoding files (o200k_base, cl100k_base); "
        "without it prompts are estimated from their bytes.",
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8400, "--port", min=0, max=65535, help="Port (0: any free one)."),
    ready_file: Path | None = typer.Option(
        None, "--ready-file", help="Write the bound port here once listening."
    ),
    log_level: str = typer.Option("warning", "--log-level", help="debug, info, warning or error."),
    log_format: str | None = LOG_FORMAT_OPTION,
    fabric: Path | None = typer.Option(
        None,
        "--fabric",
        help="Fabric file (YAML): refuse a configuration whose egress sites or teams it lacks.",
    ),
) -> None:
    """Serve /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models (blocking).

    Calls that fail upstream (502, 504) and streams cut mid-way are logged at WARNING.
    """
    from onecluster.fabric import load_fabric
    from onecluster.gateway import GatewaySettings, load_gateway_config, serve_gateway

    gateway_config = load_gateway_config(config)
    if fabric is not None:
        known = load_fabric(fabric)
        try:
            gateway_config.check_fabric(known)
        except ValidationError as exc:
            msg = f"{config} does not match fabric file {fabric}: {exc.message}"
            raise ValidationError(msg, hint=exc.hint) from None
    start_logging(ctx, role="gateway", level=log_level, log_format=log_format)
    if tokenizers is not None:
        if not tokenizers.is_dir():
            msg = f"--tokenizers {tokenizers} is not a directory"
            raise ValidationError(msg)
        # tiktoken finds its files only through this variable; set before it loads any.
        os.environ["TIKTOKEN_CACHE_DIR"] = str(tokenizers)
    settings = GatewaySettings(
        db=_db(ctx, db), secret_path=_secret(ctx, secret), tokenizers_dir=tokenizers
    )

    def ready(bound: int) -> None:
        err_console().print(f"gateway listening on http://{host}:{bound}/v1")
        if ready_file is not None:
            ready_file.write_text(f"{bound}\n")

    serve_gateway(gateway_config, settings, host=host, port=port, on_ready=ready)


def fake_upstream(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8480, "--port", min=0, max=65535, help="Port (0: any free one)."),
    ready_file: Path | None = typer.Option(
        None, "--ready-file", help="Write the bound port here once listening."
    ),
) -> None:
    """Serve a FAKE OpenAI-compatible upstream (canned answers; for trials and benchmarks)."""
    from onecluster.gateway import serve_fake_upstream

    def ready(bound: int) -> None:
        err_console().print(f"FAKE upstream listening on http://{host}:{bound}/v1")
        if ready_file is not None:
            ready_file.write_text(f"{bound}\n")

    serve_fake_upstream(host=host, port=port, on_ready=ready)


def _money(text: str | None, what: str) -> Decimal | None:
    if text is None:
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        msg = f"{what} {text!r} is not a number"
        raise ValidationError(msg) from None
    if value < 0:
        msg = f"{what} cannot be negative"
        raise ValidationError(msg)
    return value


def issue(
    ctx: typer.Context,
    *,
    config: Path = _CONFIG,
    team: str = typer.Option(..., "--team", help="The team the key bills to."),
    name: str = typer.Option("default", "--name", help="What the key is for."),
    rpm: int | None = typer.Option(None, "--rpm", min=1, help="Requests a minute (≤ tier's)."),
    tpm: int | None = typer.Option(None, "--tpm", min=1, help="Tokens a minute (≤ tier's)."),
    daily_spend: str | None = typer.Option(None, "--daily-spend", help="Spend a day (≤ tier's)."),
    monthly_spend: str | None = typer.Option(
        None, "--monthly-spend", help="Spend a month (≤ tier's)."
    ),
    model: list[str] | None = typer.Option(
        None, "--model", help="Allowed model (repeat; must be on the tier)."
    ),
    db: str | None = _DB,
) -> None:
    """Issue a team key and print it once; the gateway keeps only its hash."""
    from onecluster.gateway import GatewayStore, KeyLimits, load_gateway_config

    gateway_config = load_gateway_config(config)
    policy = gateway_config.team(team)
    if policy is None:
        known = ", ".join(t.name for t in gateway_config.teams) or "none"
        msg = f"team {team!r} is not in {config} (teams: {known})"
        raise ValidationError(msg)
    limits = KeyLimits(
        rpm=rpm,
        tpm=tpm,
        daily_spend=_money(daily_spend, "--daily-spend"),
        monthly_spend=_money(monthly_spend, "--monthly-spend"),
        models=tuple(model) if model else None,
    )
    limits.check_within(gateway_config.tier(policy.tier))
    store = GatewayStore(_db(ctx, db))
    try:
        issued = store.issue_key(team, name, limits, time.time())
    finally:
        store.close()
    err_console().print(
        f"key {issued.record.key_id} for team {team} (tier {policy.tier}); shown only once:"
    )
    out_console().print(issued.secret)


def revoke(
    ctx: typer.Context,
    key_id: str = typer.Argument(..., help="The key's id (from `keys list`)."),
    db: str | None = _DB,
) -> None:
    """Revoke a key; every gateway process refuses it within a second."""
    from onecluster.gateway import GatewayStore

    store = GatewayStore(_db(ctx, db))
    try:
        record = store.revoke_key(key_id, time.time())
    finally:
        store.close()
    err_console().print(f"key {record.key_id} of team {record.team} revoked")


def list_keys(
    ctx: typer.Context,
    team: str | None = typer.Option(None, "--team", help="Only this team's keys."),
    db: str | None = _DB,
) -> None:
    """List keys (never their secrets)."""
    from onecluster.gateway import GatewayStore

    store = GatewayStore(_db(ctx, db))
    try:
        records = store.team_keys(team)
    finally:
        store.close()
    table = Table(header_style="bold")
    for column in ("KEY", "TEAM", "NAME", "CREATED", "STATE", "OWN LIMITS"):
        table.add_column(column)
    for r in records:
        own = r.limits.model_dump(exclude_none=True)
        table.add_row(
            r.key_id,
            r.team,
            r.name,
            time.strftime("%Y-%m-%d %H:%M", time.gmtime(r.created_at)),
            "active" if r.active else "revoked",
            ", ".join(f"{k}={v}" for k, v in own.items()) or "-",
        )
    out_console().print(table)


def set_provider_key(
    ctx: typer.Context,
    upstream: str = typer.Argument(..., help="The upstream (as named in the configuration)."),
    config: Path = _CONFIG,
    db: str | None = _DB,
    secret: Path | None = _SECRET,
) -> None:
    """Seal an upstream's provider key, read from stdin, into the gateway's database."""
    from onecluster.gateway import GatewayStore, SecretBox, load_gateway_config

    gateway_config = load_gateway_config(config)
    if upstream not in {u.name for u in gateway_config.upstreams}:
        msg = f"upstream {upstream!r} is not in {config}"
        raise ValidationError(msg)
    if sys.stdin.isatty():
        err_console().print(f"paste the provider key of {upstream}, then Enter:")
    key = sys.stdin.readline().strip()
    if not key:
        msg = "no provider key on stdin"
        raise ValidationError(
            msg, hint=f'echo "$KEY" | onecluster gateway provider-key set {upstream}'
        )
    box = SecretBox.open(_secret(ctx, secret))
    store = GatewayStore(_db(ctx, db))
    try:
        store.set_provider_key(upstream, box.seal(key), time.time())
    finally:
        store.close()
    err_console().print(f"provider key of {upstream} sealed; restart the gateway to use it")

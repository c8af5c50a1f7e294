"""Fabrics for the tests of changing the fabric while the server runs, and the app with the
fabric routes (included here until ``create_app`` includes them itself)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from fastapi import FastAPI

from onecluster.clock import Clock
from onecluster.fabric import load_fabric
from onecluster.model import Circuit, Fabric, GpuPool, Site
from onecluster.server import ServerConfig, _routes_fabric, create_app

THREE = load_fabric(Path(__file__).resolve().parents[2] / "examples/fabrics/three-site.yaml")


def with_fabric_routes(config: ServerConfig, *, clock: Clock | None = None) -> FastAPI:
    """The app, with the fabric routes included if ``create_app`` does not include them yet."""
    app = create_app(config, clock=clock)
    paths = {getattr(r, "path", None) for r in app.routes}
    if "/api/v1/fabric" not in paths:
        app.include_router(_routes_fabric.router)
    return app


def onboarded(fabric: Fabric = THREE) -> Fabric:
    """``fabric`` with Osaka (16 H200, one circuit to Tokyo) and Tokyo's H100 pool grown."""
    osaka = Site(
        name="osaka",
        region="ap-northeast-3",
        jurisdiction="JP",
        pools=(GpuPool(gpu_type="H200", count=16, cost_per_gpu_hour=4.0),),
    )
    tokyo = fabric.site("tokyo")
    grown = replace(
        tokyo,
        pools=tuple(replace(p, count=256) if p.gpu_type == "H100" else p for p in tokyo.pools),
    )
    return replace(
        fabric,
        sites=(*(grown if s.name == "tokyo" else s for s in fabric.sites), osaka),
        circuits=(
            *fabric.circuits,
            Circuit(name="tyo-osa", a="tokyo", b="osaka", capacity_gbps=10, rtt_ms=8),
        ),
    )


def without_l40s(fabric: Fabric = THREE) -> Fabric:
    """``fabric`` without Tokyo's L40S pool (and the quotas for L40S)."""
    return replace(
        fabric,
        sites=tuple(
            replace(s, pools=tuple(p for p in s.pools if p.gpu_type != "L40S"))
            if s.name == "tokyo"
            else s
            for s in fabric.sites
        ),
        teams=tuple(
            replace(t, quota={k: v for k, v in t.quota.items() if k != "L40S"})
            if t.quota is not None
            else t
            for t in fabric.teams
        ),
    )

"""``/docs`` and ``/redoc`` work on a host without Internet: every asset comes from the server.

The browser test needs Chromium (Debian's ``chromium``) and Playwright (the ``browser``
extra); ``scripts/browser-host.sh`` installs both and CI runs it.  Without them it is skipped
and says why.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import pytest

if TYPE_CHECKING:
    from conftest import RunningServer

_ASSET = re.compile(r"""(?:src|href)=["']([^"']+)["']|url:\s*'([^']+)'""")
_TYPES = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}
CHROMIUM = "/usr/bin/chromium"


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_api_docs_load_every_asset_from_the_server_itself(
    server: RunningServer, page: str
) -> None:
    html = httpx.get(server.url + page, timeout=10)
    assert html.status_code == 200
    assets = [a or b for a, b in _ASSET.findall(html.text)]
    assert any(a.endswith(".js") for a in assets), assets
    for asset in assets:
        assert asset.startswith("/") and not asset.startswith("//"), f"{asset} is not local"
        answer = httpx.get(server.url + asset, timeout=10)
        assert answer.status_code == 200, asset
        suffix = Path(urlsplit(asset).path).suffix
        if suffix in _TYPES:
            assert answer.headers["content-type"].startswith(_TYPES[suffix]), asset
            assert len(answer.content) > 1000, asset  # the real file, not a stub


def _operations(server: RunningServer) -> int:
    paths: dict[str, dict[str, Any]] = httpx.get(f"{server.url}/openapi.json").json()["paths"]
    return sum(len(methods) for methods in paths.values())


@pytest.mark.slow
def test_the_docs_render_in_a_browser_cut_off_from_everything_but_the_server(
    server: RunningServer, tmp_path: Path
) -> None:
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.skip("Chromium is not installed (scripts/browser-host.sh installs it)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed (scripts/browser-host.sh)"
    )
    blocked: list[tuple[str, str]] = []

    def only_the_server(route: Any) -> None:
        request = route.request
        if urlsplit(request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            blocked.append((request.resource_type, request.url))
            route.abort()

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            tmp_path / "profile",  # a fresh profile
            executable_path=CHROMIUM,
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        try:
            page = browser.pages[0] if browser.pages else browser.new_page()
            page.route("**/*", only_the_server)
            page.goto(f"{server.url}/docs")
            page.wait_for_selector(".opblock", timeout=30_000)
            assert page.locator(".opblock").count() == _operations(server)
            page.goto(f"{server.url}/redoc")
            page.wait_for_selector("[data-section-id^='tag/']", timeout=30_000)
            assert page.locator("h1").first.inner_text().startswith("onecluster")
        finally:
            browser.close()
    # ReDoc's footer asks for its logo image; nothing the pages need came from outside
    assert [kind for kind, _ in blocked if kind != "image"] == [], blocked

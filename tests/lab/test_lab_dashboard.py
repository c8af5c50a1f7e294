"""The NOC dashboard in Chromium against the three-site lab (root, slow).

The browser may reach nothing but the lab's server.  It signs in with the admin token and
watches, live: a cut circuit turn red on the map and the route between its sites change; a
job go pending → running → completed; a transfer's progress advance.  Then every page and
both languages render without a console error, the monthly report prints to a PDF, and a
team member sees only the pages of their role.  Screenshots of every page are written to
the test's directory (their paths are printed), and also to ``$ONECLUSTER_SCREENSHOTS``
when set (``docs/noc/`` holds those of the documentation).
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from tests.lab.conftest import needs_lab_host, running_lab, wait_for

from onecluster.client import Client
from onecluster.lab import Lab
from onecluster.schema import DatasetAdd, JobSubmit, PushIn, TokenCreate

CHROMIUM = "/usr/bin/chromium"
pytestmark = [pytest.mark.lab, pytest.mark.slow, needs_lab_host]

# Every state change of the rows the test watches, recorded in the page as the live view
# re-renders them (a poll from the test could miss a state that lasts less than its period).
_RECORDER = """
() => {
  window.__seen = {};
  const note = (el, key, attr) => {
    const list = (window.__seen[key] ||= []);
    const value = el.getAttribute(attr);
    if (list[list.length - 1] !== value) list.push(value);
  };
  const scan = () => {
    for (const el of document.querySelectorAll("[data-job]")) {
      note(el, "job:" + el.dataset.job, "data-state");
    }
    for (const el of document.querySelectorAll("[data-transfer]")) {
      note(el, "transfer:" + el.dataset.transfer, "data-done");
    }
  };
  const all = { subtree: true, childList: true, attributes: true };
  new MutationObserver(scan).observe(document.body, all);
  scan();
}
"""


@pytest.fixture(scope="module")
def lab_and_admin() -> Iterator[tuple[Lab, Client]]:
    with running_lab() as both:
        yield both


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def browser(
    lab_and_admin: tuple[Lab, Client], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.skip("Chromium is not installed (scripts/browser-host.sh installs it)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed (scripts/browser-host.sh)"
    )
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            tmp_path_factory.mktemp("profile"),
            executable_path=CHROMIUM,
            viewport={"width": 1400, "height": 1000},
            args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"],
        )
        try:
            yield context
        finally:
            context.close()


class Dashboard:
    """One tab of the dashboard, signed in, that counts what the browser complains of."""

    def __init__(self, context: Any, url: str, token: str, shots: Path) -> None:
        self.url = url.rstrip("/")
        self.shots = shots
        self.problems: list[str] = []
        self.blocked: list[str] = []
        self.page = context.new_page()
        host = urlsplit(self.url).hostname
        self.page.route("**/*", lambda route: self._only(route, host))
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        self.page.goto(self.url + "/")
        self.page.fill("#token", token)
        self.page.click("#login button[type=submit]")
        self.page.wait_for_selector("#live[data-state=on]", timeout=20_000)

    def _only(self, route: Any, host: str | None) -> None:
        if urlsplit(route.request.url).hostname == host:
            route.continue_()
        else:
            self.blocked.append(route.request.url)
            route.abort()

    def _console(self, message: Any) -> None:
        if message.type in ("error", "warning"):
            self.problems.append(f"console {message.type}: {message.text}")

    def open(self, page: str) -> None:
        self.page.goto(f"{self.url}/#/{page}")
        self.page.wait_for_selector(f"[data-view={page}]", timeout=20_000)

    def wait(self, check: str, what: str, timeout_s: float = 30.0, arg: object = None) -> None:
        """Wait until the JavaScript predicate ``check`` holds in the page."""
        try:
            self.page.wait_for_function(check, arg=arg, timeout=timeout_s * 1000)
        except Exception as exc:  # noqa: BLE001 (Playwright's TimeoutError, imported late)
            self.shot(f"failed-{what.replace(' ', '-')}")
            pytest.fail(f"the dashboard never showed {what} within {timeout_s} s: {exc}")

    def shot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")  # attached to the test's output
        keep = os.environ.get("ONECLUSTER_SCREENSHOTS")
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(keep) / path.name)
        return path

    def seen(self, key: str) -> list[str]:
        found: list[str] = self.page.evaluate("(key) => (window.__seen || {})[key] || []", key)
        return found


@pytest.fixture(scope="module")
def admin_tab(browser: Any, lab_and_admin: tuple[Lab, Client], shots: Path) -> Iterator[Dashboard]:
    lab, _ = lab_and_admin
    status = lab.status()
    assert status.server_url is not None
    tab = Dashboard(browser, status.server_url, status.admin_token_file.read_text().strip(), shots)
    yield tab
    assert tab.problems == [], tab.problems
    assert tab.blocked == [], f"the dashboard asked for something outside the server: {tab.blocked}"


def test_1_a_cut_circuit_turns_red_and_the_route_between_its_sites_changes(
    admin_tab: Dashboard, lab_and_admin: tuple[Lab, Client]
) -> None:
    lab, _ = lab_and_admin
    tab = admin_tab
    tab.open("overview")
    tab.page.select_option("select[data-pick=src]", "shanghai")
    tab.page.select_option("select[data-pick=dst]", "singapore")
    tab.wait(
        "() => [...document.querySelectorAll('svg.map .circuit')].every("
        "c => c.dataset.state === 'up')",
        "every circuit up",
        timeout_s=60,
    )
    route = "[data-route='shanghai>singapore'] [data-path=primary]"
    assert "sha-sin-hk" in tab.page.inner_text(route)
    assert tab.page.locator("svg.map [data-primary=sha-sin-hk]").count() == 1
    tab.shot("overview")
    assert lab.cut("shanghai", "singapore", circuit="sha-sin-hk") == ["sha-sin-hk"]
    try:
        tab.wait(
            "() => document.querySelector('svg.map [data-circuit=sha-sin-hk]')"
            "?.dataset.state === 'down'",
            "sha-sin-hk down on the map",
        )
        tab.wait(
            f"() => !document.querySelector(\"{route}\")?.textContent.includes('sha-sin-hk')",
            "the route from Shanghai to Singapore leave sha-sin-hk",
        )
        colour = tab.page.eval_on_selector(
            "svg.map [data-circuit=sha-sin-hk]", "c => getComputedStyle(c).stroke"
        )
        assert colour == "rgb(198, 40, 40)"  # --down
        assert "sha-sin-tw" in tab.page.inner_text(route)
        assert tab.page.locator("svg.map [data-primary=sha-sin-tw]").count() == 1
        tab.shot("overview-circuit-cut")
        tab.open("events")
        tab.wait(
            "() => [...document.querySelectorAll('[data-kind]')].some("
            "e => e.dataset.kind.startsWith('link_down') && e.textContent.includes('sha-sin-hk'))",
            "the link_down event of sha-sin-hk in the feed",
        )
        tab.shot("events")
    finally:
        lab.heal("shanghai", "singapore", circuit="sha-sin-hk")


def test_2_a_job_goes_pending_then_running_then_completed(
    admin_tab: Dashboard, lab_and_admin: tuple[Lab, Client]
) -> None:
    _, admin = lab_and_admin
    tab = admin_tab
    tab.open("jobs")
    tab.page.evaluate(_RECORDER)
    # Speech's whole guarantee of L40S (Tokyo's only L40S pool holds 112) for a while: the job
    # watched, over that guarantee and too big for what is left, waits until it ends.
    admin.submit(
        JobSubmit(team="speech", gpus=96, gpu_types=["L40S"], duration_s=8, command=["sleep", "8"])
    )
    watched = admin.submit(
        JobSubmit(team="speech", gpus=32, gpu_types=["L40S"], duration_s=3, command=["sleep", "3"])
    )
    tab.wait(
        "(id) => document.querySelector(`[data-job='${id}']`)?.dataset.state === 'completed'",
        "the job completed",
        timeout_s=90,
        arg=watched.id,
    )
    states = tab.seen(f"job:{watched.id}")
    assert states[0] == "pending", states
    assert states[-1] == "completed", states
    assert "running" in states, states
    assert states.index("pending") < states.index("running") < states.index("completed")
    tab.shot("jobs")


def test_3_a_transfers_progress_advances(
    admin_tab: Dashboard, lab_and_admin: tuple[Lab, Client], tmp_path: Path
) -> None:
    _, admin = lab_and_admin
    tab = admin_tab
    rng = random.Random(7)
    tree = tmp_path / "shards"
    tree.mkdir()
    for i in range(30):  # 120 MB: several seconds over the lab's scaled circuits
        (tree / f"{i:02}.bin").write_bytes(rng.randbytes(4_000_000))
    scan = admin.add_dataset(DatasetAdd(name="noc-shards", site="singapore", path=str(tree)))
    wait_for(lambda: admin.scan(scan.id).state in ("done", "failed"), 60, "the dataset's scan")
    assert admin.scan(scan.id).state == "done"
    tab.open("transfers")
    tab.page.evaluate(_RECORDER)
    transfer = admin.push(PushIn.model_validate({"dataset": "noc-shards", "to": "shanghai"}))
    tab.wait(
        "(id) => document.querySelector(`[data-transfer='${id}']`)?.dataset.state === 'done'",
        "the transfer done",
        timeout_s=120,
        arg=transfer.id,
    )
    done = [int(v) for v in tab.seen(f"transfer:{transfer.id}")]
    total = admin.transfer(transfer.id).bytes_total
    partial = [v for v in done if 0 < v < total]
    assert partial, f"no progress between 0 and {total} was shown: {done}"
    assert done == sorted(done) and done[-1] == total
    tab.page.evaluate("() => { window.__seen = {}; }")
    tab.shot("transfers")


def test_4_every_page_renders_in_both_languages_and_the_report_prints(
    admin_tab: Dashboard, tmp_path: Path
) -> None:
    tab = admin_tab
    for page in ("register", "report", "overview"):
        tab.open(page)
        tab.page.wait_for_timeout(300)  # let a tick's refresh land before the screenshot
        tab.shot(page if page != "overview" else "overview-after")
    tab.open("register")
    tab.wait(
        "() => document.querySelector('[data-register]')?.dataset.register === 'verified'",
        "the register verified",
    )
    tab.open("report")
    assert tab.page.locator("svg.chart rect").count() >= 6
    pdf = tmp_path / "report.pdf"
    tab.page.emulate_media(media="print")
    tab.page.pdf(path=str(pdf), format="A4")
    tab.page.emulate_media(media="screen")
    assert pdf.read_bytes().startswith(b"%PDF") and pdf.stat().st_size > 10_000
    tab.page.select_option("#lang", "zh-CN")
    tab.open("overview")
    tab.wait(
        "() => document.querySelector('[data-page=overview]')?.textContent === '总览'", "zh-CN"
    )
    assert tab.page.get_attribute("html", "lang") == "zh-CN"
    assert "站点与专线" in tab.page.inner_text("[data-card=map] h2")
    tab.shot("overview-zh-CN")
    tab.open("report")
    tab.shot("report-zh-CN")
    tab.page.select_option("#lang", "en")
    tab.open("overview")
    tab.wait(
        "() => document.querySelector('[data-page=overview]')?.textContent === 'Overview'", "en"
    )


def test_5_a_tick_does_not_redraw_under_a_reader_who_selects_text(admin_tab: Dashboard) -> None:
    """Redrawing every second would drop a selection (a job id to copy) and close an open
    list; the page waits until the reader has been still for a few seconds."""
    tab = admin_tab
    tab.open("events")
    tab.wait("() => document.querySelector('[data-event]') !== null", "an event")
    drawn = tab.page.get_attribute("body", "data-rendered")
    tab.wait(
        "(before) => document.body.dataset.rendered !== before", "a redraw on a tick", arg=drawn
    )
    tab.page.evaluate(
        "() => window.getSelection().selectAllChildren(document.querySelector('[data-event]'))"
    )
    held = tab.page.get_attribute("body", "data-rendered")
    tab.page.wait_for_timeout(2500)  # two ticks at least, while the reader selects
    assert tab.page.get_attribute("body", "data-rendered") == held
    assert tab.page.evaluate("() => window.getSelection().toString().length") > 0
    tab.wait(  # and once the reader is still, the page is live again
        "(before) => document.body.dataset.rendered !== before", "a redraw after", arg=held
    )


def test_6_a_team_member_sees_only_the_pages_of_the_role(
    browser: Any, lab_and_admin: tuple[Lab, Client], shots: Path
) -> None:
    lab, admin = lab_and_admin
    status = lab.status()
    assert status.server_url is not None
    member = admin.create_token(TokenCreate(role="member", team="vision", holder="noc")).token
    tab = Dashboard(browser, status.server_url, member, shots)
    pages = [a.get_attribute("data-page") for a in tab.page.locator("#nav a").all()]
    assert pages == ["overview", "jobs", "transfers", "events"]
    tab.open("jobs")
    teams = {t.inner_text() for t in tab.page.locator("[data-job] td:nth-child(3)").all()}
    assert teams <= {"vision"}
    tab.page.goto(f"{tab.url}/#/report")  # not the role's: the overview instead
    tab.page.wait_for_selector("[data-view=overview]", timeout=20_000)
    assert tab.problems == [] and tab.blocked == []
    tab.page.close()

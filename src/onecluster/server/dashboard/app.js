// The NOC view: sign in with a token, show the pages the token's role may see, and keep
// them current from the live stream of events (/api/v1/live).
import { ApiError, LiveStream, get, setToken, token } from "./api.js";
import { h } from "./dom.js";
import { language, setLanguage, t, translate } from "./i18n.js";
import * as views from "./views.js";

const PAGES = {
  overview: { roles: ["admin", "member", "compliance", "auditor"], render: (who) => views.overview(who), live: true },
  jobs: { roles: ["admin", "member"], render: () => views.jobs(), live: true },
  transfers: { roles: ["admin", "member", "compliance", "auditor"], render: () => views.transfers(), live: true },
  register: { roles: ["admin", "compliance", "auditor"], render: () => views.register(), live: false },
  events: { roles: ["admin", "member", "compliance", "auditor"], render: () => views.feed(state.events), live: true },
  report: { roles: ["admin"], render: () => views.report(), live: false },
};

const state = { who: null, events: [], stream: null, busy: false, again: false, touched: 0 };
const $ = (id) => document.getElementById(id);

function pageName() {
  const wanted = location.hash.replace(/^#\/?/, "") || "overview";
  const allowed = Object.keys(PAGES).filter((p) => PAGES[p].roles.includes(state.who.role));
  return allowed.includes(wanted) ? wanted : allowed[0];
}

function drawNav(current) {
  $("nav").replaceChildren(...Object.entries(PAGES)
    .filter(([, page]) => page.roles.includes(state.who.role))
    .map(([name]) => h("a", { href: `#/${name}`, class: name === current ? "on" : null, "data-page": name, "data-i18n": `page_${name}` }, t(`page_${name}`))));
}

// Whether the reader is using the page: a list or field in focus, or text selected in it,
// touched in the last few seconds.  A tick does not redraw under them (it would close the
// list or drop the selection); a later one does, so a page left alone never freezes.
const IN_USE_MS = 5000;

function inUse() {
  if (Date.now() - state.touched > IN_USE_MS) return false;
  const view = $("view");
  const active = document.activeElement;
  if (active && view.contains(active) && ["SELECT", "INPUT", "TEXTAREA"].includes(active.tagName)) return true;
  const selection = window.getSelection();
  return Boolean(selection && !selection.isCollapsed && view.contains(selection.anchorNode));
}

// One render at a time; a request for another while one runs is kept and done after it.
// A redraw keeps the scroll position of every scrolling list (``data-keep-scroll``).
async function render(why) {
  if (!state.who) return;
  if (why === "tick" && inUse()) return;
  if (state.busy) { state.again = true; return; }
  state.busy = true;
  const name = pageName();
  try {
    drawNav(name);
    const view = await PAGES[name].render(state.who);
    view.dataset.view = name;
    const scrolled = {};
    for (const el of $("view").querySelectorAll("[data-keep-scroll]")) scrolled[el.dataset.keepScroll] = el.scrollTop;
    $("view").replaceChildren(view);
    for (const el of view.querySelectorAll("[data-keep-scroll]")) el.scrollTop = scrolled[el.dataset.keepScroll] || 0;
    document.body.dataset.showing = name;
    document.body.dataset.rendered = String(Date.now());
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) { signOut(); return; }
    const text = err instanceof ApiError && err.status === 403 ? t("not_for_role") : `${t("error")}: ${err.message}`;
    $("view").replaceChildren(h("p", { class: "error", role: "alert" }, text));
  } finally {
    state.busy = false;
  }
  if (state.again) { state.again = false; render(); }
}

function setLive(value) {
  const live = $("live");
  live.dataset.state = value;
  live.dataset.i18n = `live_${value}`;
  live.textContent = t(`live_${value}`);
}

async function signIn() {
  let who;
  try {
    who = await get("/api/v1/whoami");
  } catch (err) {
    setToken(null);
    showLogin(err instanceof ApiError && err.status === 401 ? t("bad_token") : err.message);
    return;
  }
  if (who.role === "agent") { setToken(null); showLogin(t("agent_token")); return; }
  state.who = who;
  $("login").hidden = true;
  $("logout").hidden = false;
  $("who").textContent = who.team ? `${who.role} · ${who.team}` : who.role;
  state.events = await get("/api/v1/events?limit=200").catch(() => []);
  const after = state.events.length ? state.events[state.events.length - 1].id : null;
  state.stream = new LiveStream({
    after,
    onFeed: (event) => {
      state.events.push(event);
      if (state.events.length > 1000) state.events.splice(0, state.events.length - 1000);
      document.body.dataset.lastEvent = String(event.id);
    },
    onTick: () => { if (PAGES[pageName()].live) render("tick"); },
    onState: setLive,
  });
  state.stream.start();
  render();
}

function showLogin(message) {
  $("login").hidden = false;
  $("logout").hidden = true;
  $("view").replaceChildren();
  $("nav").replaceChildren();
  $("who").textContent = "";
  $("login-error").textContent = message || "";
}

function signOut() {
  if (state.stream) state.stream.stop();
  state.stream = null;
  state.who = null;
  setToken(null);
  showLogin("");
}

function main() {
  $("lang").value = language();
  setLanguage(language());
  $("lang").addEventListener("change", (e) => { setLanguage(e.target.value); render(); });
  $("login").addEventListener("submit", (e) => {
    e.preventDefault();
    setToken($("token").value.trim());
    $("token").value = "";
    signIn();
  });
  $("logout").addEventListener("click", signOut);
  for (const kind of ["pointerdown", "keydown", "focusin", "wheel"]) {
    $("view").addEventListener(kind, () => { state.touched = Date.now(); }, { passive: true });
  }
  document.addEventListener("selectionchange", () => { state.touched = Date.now(); });
  window.addEventListener("hashchange", () => render());
  window.addEventListener("oc-refresh", () => render());
  translate(document);
  if (token()) signIn();
  else showLogin("");
}

main();

// The pages.  Each reads the REST API (the same routes the CLI reads) and returns its
// elements; what the user chose on a page (a pair of sites, a job's "why", a filter, a month)
// survives the refresh that every tick of the live stream brings.
import { get } from "./api.js";
import { barChart } from "./charts.js";
import { bytes, card, clock, duration, h, label, meter, ms, pct, rate, stateBadge, table } from "./dom.js";
import { t } from "./i18n.js";
import { drawMap, measured } from "./map.js";
import { checkRegister } from "./verify.js";

const chosen = { src: null, dst: null, why: null, kinds: "all", month: new Date().toISOString().slice(0, 7) };

const isAlert = (kind) => /down|lost|fail|refus|tamper|stall|preempt|unreachable|violat|suppress/.test(kind);

// Each circuit's share of its capacity carried by the transfers in flight.
function circuitLoad(links, transfers) {
  const capacity = Object.fromEntries(links.map((l) => [l.circuit, l.capacity_gbps * 1e9]));
  const load = {};
  for (const tr of transfers) {
    if (tr.state !== "running") continue;
    for (const path of tr.paths) {
      for (const c of path.circuits) load[c] = (load[c] || 0) + (path.rate_bps || 0) / (capacity[c] || Infinity);
    }
  }
  return load;
}

function mapCard(sites, links, routes, load) {
  const names = sites.map((x) => x.name);
  chosen.src = names.includes(chosen.src) ? chosen.src : names[0];
  chosen.dst = names.includes(chosen.dst) && chosen.dst !== chosen.src ? chosen.dst : names.find((n) => n !== chosen.src);
  const route = routes.routes.find((r) => r.src === chosen.src && r.dst === chosen.dst);
  const picker = (field) => h("select", { "data-pick": field, onchange: (e) => { chosen[field] = e.target.value; e.target.blur(); window.dispatchEvent(new Event("oc-refresh")); } },
    names.map((n) => h("option", { value: n, selected: n === chosen[field] }, n)));
  const pathText = (circuits, sitesOnPath) => (circuits && circuits.length ? `${sitesOnPath.join(" → ")} (${circuits.join(", ")})` : t("unreachable"));
  const el = card("map",
    h("div", { class: "toolbar" }, label("path_from"), picker("src"), label("path_to"), picker("dst"),
      h("span", { class: "note", "data-selected-route": `${chosen.src}>${chosen.dst}` },
        route ? `${t("primary")}: ${pathText(route.circuits, route.sites)} · ${t("backup")}: ${pathText(route.backup_circuits, route.backup_sites)}` : t("unreachable"))),
    drawMap({ sites, links, route, load }),
    h("div", { class: "legend" },
      ["up", "degraded", "down", "unknown"].map((st) => h("span", {}, h("i", { style: `background:var(--${st})` }), t(`state_${st}`))),
      h("span", {}, h("i", { style: "background:var(--primary)" }), t("primary")),
      h("span", {}, h("i", { style: "background:var(--backup)" }), t("backup"))));
  el.classList.add("wide");
  return el;
}

function circuitsCard(links, load) {
  return card("circuits", table(["circuit", "state", "rtt", "jitter", "loss", "load"],
    links.map((l) => {
      const m = measured(l);
      return h("tr", { "data-circuit-row": l.circuit, "data-state": l.state },
        h("td", {}, `${l.circuit} (${l.a}–${l.b})`), h("td", {}, stateBadge(l.state, t(`state_${l.state}`))),
        h("td", { class: "num" }, ms(m.rtt)), h("td", { class: "num" }, ms(m.jitter)),
        h("td", { class: "num" }, pct(m.loss)), h("td", { class: "num" }, pct(load[l.circuit] || 0)));
    }), ["rtt", "jitter", "loss", "load"]));
}

function routesCard(routes) {
  const path = (sites, circuits) => (circuits.length ? `${sites.join(" → ")} [${circuits.join(", ")}]` : t("unreachable"));
  return card("routes", table(["route_src", "route_dst", "route_primary", "route_backup"],
    routes.routes.map((r) => h("tr", { "data-route": `${r.src}>${r.dst}` },
      h("td", {}, r.src), h("td", {}, r.dst),
      h("td", { "data-path": "primary" }, path(r.sites, r.circuits)),
      h("td", { "data-path": "backup" }, path(r.backup_sites, r.backup_circuits))))));
}

function poolsCard(sites) {
  const rows = sites.flatMap((site) => site.pools.map((p) => h("tr", { "data-pool": `${site.name}/${p.gpu_type}` },
    h("td", {}, site.name), h("td", {}, p.gpu_type + (p.draining ? " ⏸" : "")),
    h("td", {}, meter(p.count ? p.used / p.count : 0, `${p.used}/${p.count}`)))));
  return card("pools", table(["site", "pool", "used"], rows));
}

function teamsCard(teams) {
  const sum = (m) => Object.values(m || {}).reduce((n, v) => n + v, 0);
  return card("teams", table(["team", "quota", "usage", "borrowed"], teams.map((tm) => h("tr", { "data-team": tm.name },
    h("td", {}, tm.name), h("td", { class: "num" }, sum(tm.quota)),
    h("td", {}, meter(sum(tm.quota) ? sum(tm.usage) / sum(tm.quota) : 0, String(sum(tm.usage)))),
    h("td", {}, meter(sum(tm.usage) ? sum(tm.borrowed) / sum(tm.usage) : 0, String(sum(tm.borrowed)), "borrowed")))), ["quota"]));
}

// The counters come from /stats (the whole cluster); the list, from the jobs the token may
// see, is the longest-waiting pending ones.
async function queueCard(stats, pending) {
  const counts = {
    pending: stats.pending, running: stats.running - (stats.waiting_for_data || 0),
    borrowed: stats.borrowed || 0, waiting_data: stats.waiting_for_data || 0,
  };
  const counters = h("div", { class: "counters" }, Object.entries(counts).map(([k, v]) =>
    h("div", { class: "counter", "data-counter": k }, h("b", {}, v), label(k))));
  if (!pending) return card("queue", counters);
  let why = null;
  if (chosen.why && pending.some((j) => j.id === chosen.why)) {
    why = await get(`/api/v1/jobs/${encodeURIComponent(chosen.why)}/why`).then((w) => w.summary, (e) => e.message);
  }
  const list = pending.length
    ? table(["job", "team", "gpus", "waited", "why"], pending.map((j) => h("tr", { "data-job": j.id, "data-state": j.state },
      h("td", {}, j.name || j.id), h("td", {}, j.team), h("td", { class: "num" }, j.gpus),
      h("td", { class: "num" }, duration(Date.now() / 1000 - j.submitted_at)),
      h("td", {}, h("button", { type: "button", onclick: () => { chosen.why = j.id; window.dispatchEvent(new Event("oc-refresh")); } }, "?")))), ["gpus", "waited"])
    : h("p", { class: "note" }, t("no_pending"));
  return card("queue", counters, list, why ? h("p", { class: "why", "data-why": chosen.why }, why) : null);
}

// The longest-waiting pending jobs the token may see (the API lists newest first).
async function oldestPending(who, stats) {
  const shown = 12;
  if (who.role === "admin") {
    const offset = Math.max(0, stats.pending - shown);
    return (await get(`/api/v1/jobs?state=pending&limit=${shown}&offset=${offset}`)).reverse();
  }
  const mine = await get("/api/v1/jobs?state=pending&limit=10000");
  return mine.slice(-shown).reverse();
}

export async function overview(who) {
  const canJobs = who.role === "admin" || who.role === "member";
  const [sites, links, routes, teams, stats, transfers] = await Promise.all([
    get("/api/v1/sites"), get("/api/v1/links"), get("/api/v1/routes"), get("/api/v1/teams"),
    get("/api/v1/stats"), get("/api/v1/transfers"),
  ]);
  const pending = canJobs ? await oldestPending(who, stats) : null;
  const load = circuitLoad(links, transfers);
  return h("div", { class: "grid" }, mapCard(sites, links, routes, load), circuitsCard(links, load),
    routesCard(routes), poolsCard(sites), teamsCard(teams), await queueCard(stats, pending));
}

export async function jobs() {
  const list = await get("/api/v1/jobs?limit=100");
  return card("jobs", table(["job", "name", "team", "state", "gpus", "sites", "submitted", "reason"],
    list.map((j) => h("tr", { "data-job": j.id, "data-state": j.state },
      h("td", {}, j.id), h("td", {}, j.name || ""), h("td", {}, j.team),
      h("td", {}, stateBadge(j.state, t(`state_${j.state}`)), j.borrowed ? ` ${t("borrowed")}` : ""),
      h("td", { class: "num" }, j.gpus), h("td", {}, j.parts.map((p) => `${p.site}:${p.gpus}×${p.gpu_type}`).join(" ")),
      h("td", {}, clock(j.submitted_at)), h("td", { class: "note" }, j.reason || ""))), ["gpus"]));
}

export async function transfers() {
  const list = await get("/api/v1/transfers?state=all&limit=50");
  if (!list.length) return card("transfers", h("p", { class: "note" }, t("no_transfers")));
  return card("transfers", table(["dataset", "from_to", "state", "progress", "rate", "eta", "paths"],
    list.map((tr) => h("tr", { "data-transfer": tr.id, "data-state": tr.state, "data-done": tr.bytes_done, "data-total": tr.bytes_total },
      h("td", {}, tr.dataset), h("td", {}, `${tr.src} → ${tr.dst}`), h("td", {}, stateBadge(tr.state, t(`state_${tr.state}`))),
      h("td", {}, meter(tr.bytes_total ? tr.bytes_done / tr.bytes_total : 0, `${bytes(tr.bytes_done)} / ${bytes(tr.bytes_total)}`)),
      h("td", { class: "num" }, rate(tr.rate_bps)), h("td", { class: "num" }, duration(tr.eta_s)),
      h("td", { class: "note" }, tr.paths.map((p) => `${p.name}: ${p.circuits.join("+")}`).join("; "))))));
}

async function allEntries(size) {
  const out = [];
  while (out.length < size) {
    const page = await get(`/api/v1/register/entries?first=${out.length}&limit=1000`);
    if (!page.entries.length) break;
    out.push(...page.entries);
  }
  return out;
}

export async function register() {
  const [head, approvals, exportsList] = await Promise.all([
    get("/api/v1/register/head"), get("/api/v1/exports/approvals"), get("/api/v1/exports")]);
  const entries = await allEntries(head.size);
  const check = checkRegister(head, entries);
  const pinned = localStorage.getItem("onecluster.register_key");
  if (!pinned) localStorage.setItem("onecluster.register_key", head.public_key);
  if (pinned && pinned !== head.public_key) { check.ok = false; check.problems.push("key_changed"); }
  const verdict = check.ok
    ? stateBadge("ok", t("verified"))
    : stateBadge("bad", check.problems.map((p) => t(p)).join("; "));
  const field = (key, value) => [h("dt", { "data-i18n": key }, t(key)), h("dd", {}, value)];
  const headCard = card("register_head", h("dl", { class: "fields", "data-register": check.ok ? "verified" : "failed", "data-problems": check.problems.join(" ") },
    field("verification", verdict), field("size", String(head.size)), field("root", head.root),
    field("signed_at", head.timestamp), field("key", head.public_key)));
  headCard.classList.add("wide");
  const entryRows = entries.slice(-50).reverse().map((text, i) => {
    const e = JSON.parse(text);
    const seq = entries.length - 1 - i;
    const what = ["type", "export", "dataset", "src", "dst", "approval", "bytes_sent", "reason"].filter((k) => k in e).map((k) => `${k}=${e[k]}`).join(" ");
    return h("tr", { "data-entry": seq }, h("td", { class: "num" }, seq), h("td", {}, e.at || ""), h("td", { class: "note" }, what || text.slice(0, 160)));
  });
  const approvalRows = approvals.map((a) => h("tr", { "data-approval": a.id },
    h("td", {}, a.id), h("td", {}, stateBadge(a.state, t(`state_${a.state}`))), h("td", {}, a.dataset), h("td", {}, a.destinations.join(", ")),
    h("td", {}, a.purpose), h("td", {}, clock(a.valid_until))));
  const exportRows = exportsList.map((x) => h("tr", { "data-export": x.id },
    h("td", {}, x.id), h("td", {}, stateBadge(x.state, t(`state_${x.state}`))), h("td", {}, `${x.src} → ${x.dst}`), h("td", {}, x.dataset), h("td", { class: "num" }, bytes(x.bytes))));
  return h("div", { class: "grid" }, headCard,
    card("entries", entryRows.length ? table(["seq_col", "at_col", "entry_col"], entryRows) : h("p", { class: "note" }, t("no_entries"))),
    card("approvals", approvalRows.length ? table(["approvals", "state", "dataset", "destinations", "purpose", "valid_until"], approvalRows) : h("p", { class: "note" }, t("no_approvals"))),
    card("exports", exportRows.length ? table(["exports", "state", "from_to", "dataset", "bytes_col"], exportRows) : h("p", { class: "note" }, t("no_exports"))));
}

export function feed(events) {
  const shown = chosen.kinds === "alerts" ? events.filter((e) => isAlert(e.kind)) : events;
  const pickKinds = h("select", { "data-pick": "kinds", onchange: (e) => { chosen.kinds = e.target.value; e.target.blur(); window.dispatchEvent(new Event("oc-refresh")); } },
    h("option", { value: "all", selected: chosen.kinds === "all" }, t("all_kinds")),
    h("option", { value: "alerts", selected: chosen.kinds === "alerts" }, t("alerts_only")));
  return card("events", h("div", { class: "toolbar" }, pickKinds),
    h("ul", { class: "feed", "data-keep-scroll": "events" }, shown.slice(-200).reverse().map((e) => h("li", { class: isAlert(e.kind) ? "alert" : null, "data-event": e.id, "data-kind": e.kind },
      h("span", { class: "kind" }, e.kind), ` ${clock(e.time)} `, e.message))));
}

export async function report() {
  const month = h("input", { type: "month", value: chosen.month, onchange: (e) => { chosen.month = e.target.value; window.dispatchEvent(new Event("oc-refresh")); } });
  const bar = h("div", { class: "toolbar" }, label("month"), month, h("button", { type: "button", onclick: () => window.print() }, t("print")));
  let gpu, compare;
  try {
    [gpu, compare] = await Promise.all([get(`/api/v1/reports/gpu?month=${chosen.month}`), get(`/api/v1/reports/gpu/compare?month=${chosen.month}`)]);
  } catch (err) {
    return h("div", {}, bar, card("report_title", h("p", { class: "error" }, err.message)));
  }
  const money = (x) => x.toFixed(2);
  const rowsOf = (list) => table(["name", "gpu_hours", "borrowed", "cost", "utilization", "mean_wait", "jobs_count"],
    list.map((r) => h("tr", { "data-report-row": r.name }, h("td", {}, r.name), h("td", { class: "num" }, r.gpu_hours.toFixed(1)),
      h("td", { class: "num" }, r.borrowed_gpu_hours.toFixed(1)), h("td", { class: "num" }, money(r.cost)),
      h("td", { class: "num" }, pct(r.utilization)), h("td", { class: "num" }, duration(r.mean_wait_s)), h("td", { class: "num" }, r.jobs))),
    ["gpu_hours", "borrowed", "cost", "utilization", "mean_wait", "jobs_count"]);
  return h("div", { "data-report": chosen.month }, bar,
    h("h1", {}, `${t("report_title")} ${gpu.month}`),
    h("div", { class: "grid" },
      card("teams", rowsOf([...gpu.teams, gpu.total])), card("sites", rowsOf(gpu.sites)),
      card("utilization_team", barChart({ rows: gpu.teams, series: [{ field: "utilization", key: "utilization" }], format: pct, titleKey: "utilization_team" })),
      card("utilization_site", barChart({ rows: gpu.sites, series: [{ field: "utilization", key: "utilization" }], format: pct, titleKey: "utilization_site" })),
      card("cost_team", barChart({ rows: gpu.teams, series: [{ field: "cost", key: "cost" }], format: money, titleKey: "cost_team" })),
      card("cost_site", barChart({ rows: gpu.sites, series: [{ field: "cost", key: "cost" }], format: money, titleKey: "cost_site" })),
      card("pooling_wait", barChart({
        rows: compare.teams.map((x) => ({ ...x, name: x.team })),
        series: [{ field: "wait_base_s", key: "wait_before" }, { field: "wait_s", key: "wait_after" }],
        format: duration, titleKey: "pooling",
      })), card("pooling_jct", barChart({
        rows: compare.teams.map((x) => ({ ...x, name: x.team })),
        series: [{ field: "jct_base_s", key: "jct_before" }, { field: "jct_s", key: "jct_after" }],
        format: duration, titleKey: "pooling",
      }))));
}

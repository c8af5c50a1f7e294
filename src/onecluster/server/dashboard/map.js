// The map: sites on a circle, each circuit a curve coloured by its state (parallel circuits
// bow apart), labelled with what its probes measure; over them the selected pair's primary
// path (solid) and backup path (dashed), from the route table.
import { s, ms, pct } from "./dom.js";
import { t } from "./i18n.js";

const W = 900;
const H = 520;

function layout(sites) {
  const cx = W / 2, cy = H / 2 + 10, r = Math.min(W, H) / 2 - 60;
  const at = {};
  sites.forEach((site, i) => {
    const angle = -Math.PI / 2 + (2 * Math.PI * i) / sites.length;
    at[site.name] = [cx + r * Math.cos(angle), cy + r * Math.sin(angle)];
  });
  return at;
}

// The curve of every circuit: a quadratic from one site to the other, bowed by its rank
// among the circuits joining the same two sites.
function curves(links, at) {
  const groups = {};
  for (const link of links) {
    const key = [link.a, link.b].sort().join("|");
    (groups[key] ||= []).push(link);
  }
  const out = {};
  for (const group of Object.values(groups)) {
    group.forEach((link, i) => {
      const [ax, ay] = at[link.a] || [0, 0];
      const [bx, by] = at[link.b] || [0, 0];
      const len = Math.hypot(bx - ax, by - ay) || 1;
      const nx = -(by - ay) / len, ny = (bx - ax) / len;
      const bow = (i - (group.length - 1) / 2) * 70;
      const mx = (ax + bx) / 2, my = (ay + by) / 2;
      out[link.circuit] = {
        d: `M${ax},${ay} Q${mx + nx * bow * 2},${my + ny * bow * 2} ${bx},${by}`,
        mid: [mx + nx * bow, my + ny * bow],
      };
    });
  }
  return out;
}

export function measured(link) {
  const ends = link.ends || [];
  const worst = (field) => {
    const values = ends.map((e) => e[field]).filter((v) => v !== null && v !== undefined);
    return values.length ? Math.max(...values) : null;
  };
  return { rtt: worst("rtt_p50_ms"), jitter: worst("jitter_ms"), loss: worst("loss") };
}

export function drawMap({ sites, links, route, load }) {
  const at = layout(sites);
  const paths = curves(links, at);
  const svg = s("svg", { class: "map", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": t("map") });
  for (const link of links) {
    const curve = paths[link.circuit];
    svg.append(s("path", { class: "circuit", d: curve.d, "data-circuit": link.circuit, "data-state": link.state },
      s("title", {}, `${link.circuit}: ${t(`state_${link.state}`)}`)));
  }
  if (route) {
    for (const c of route.backup_circuits || []) {
      if (paths[c]) svg.append(s("path", { class: "path-backup", d: paths[c].d, "data-backup": c }));
    }
    for (const c of route.circuits || []) {
      if (paths[c]) svg.append(s("path", { class: "path-primary", d: paths[c].d, "data-primary": c }));
    }
  }
  for (const link of links) {
    const [x, y] = paths[link.circuit].mid;
    const m = measured(link);
    const used = load[link.circuit];
    // Measured where the probes say; else the fabric's figure, marked as such.
    const parts = m.rtt === null ? [link.circuit, `${ms(link.rtt_ms)} (${t("nominal")})`] : [link.circuit, ms(m.rtt)];
    if (m.jitter !== null) parts.push(`±${ms(m.jitter)}`);
    if (m.rtt !== null) parts.push(pct(m.loss));
    if (used) parts.push(`${t("load")} ${pct(used)}`);
    svg.append(s("text", { x, y: y - 6, "text-anchor": "middle", class: "label" }, parts.join(" · ")));
  }
  for (const site of sites) {
    const [x, y] = at[site.name];
    const total = site.pools.reduce((n, p) => n + p.count, 0);
    const used = site.pools.reduce((n, p) => n + p.used, 0);
    svg.append(s("g", { class: "site", "data-site": site.name, "data-status": site.status },
      s("circle", { cx: x, cy: y, r: 26 }),
      s("text", { x, y: y + 4, "text-anchor": "middle" }, site.name.slice(0, 3).toUpperCase()),
      s("text", { x, y: y + 44, "text-anchor": "middle" }, `${site.name} · ${used}/${total} GPU`)));
  }
  return svg;
}

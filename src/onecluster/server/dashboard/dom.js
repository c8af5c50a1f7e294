// Building the page's elements (text only ever as text: nothing from the API becomes HTML)
// and formatting numbers.
import { t } from "./i18n.js";

const SVG = "http://www.w3.org/2000/svg";

function fill(el, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "style") {
      // Through the CSSOM: the page's policy forbids inline style attributes.
      for (const rule of String(value).split(";")) {
        const at = rule.indexOf(":");
        if (at > 0) el.style.setProperty(rule.slice(0, at).trim(), rule.slice(at + 1).trim());
      }
    }
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export const h = (tag, attrs, ...children) => fill(document.createElement(tag), attrs, children);
export const s = (tag, attrs, ...children) => fill(document.createElementNS(SVG, tag), attrs, children);
export const label = (key) => h("span", { "data-i18n": key }, t(key));

export function card(titleKey, ...children) {
  return h("section", { class: "card", "data-card": titleKey }, h("h2", { "data-i18n": titleKey }, t(titleKey)), ...children);
}

export function table(headKeys, rows, numeric = []) {
  return h(
    "table", {},
    h("thead", {}, h("tr", {}, headKeys.map((k) => h("th", { class: numeric.includes(k) ? "num" : null, "data-i18n": k }, t(k))))),
    h("tbody", {}, rows),
  );
}

export const stateBadge = (state, text) => h("span", { class: `state ${state}`, "data-state": state }, text ?? state);

export function meter(fraction, text, kind) {
  const pct = Math.max(0, Math.min(1, fraction || 0)) * 100;
  return h("div", { class: "meter" }, h("span", { class: kind || null, style: `width:${pct.toFixed(1)}%` }), h("em", {}, text));
}

export const pct = (x) => (x === null || x === undefined ? "–" : `${(x * 100).toFixed(x < 0.01 && x > 0 ? 3 : 1)} %`);
export const ms = (x) => (x === null || x === undefined ? "–" : `${x.toFixed(x < 10 ? 2 : 1)} ms`);

export function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KB", "MB", "GB", "TB", "PB"];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return `${n.toFixed(i && n < 10 ? 1 : 0)} ${units[i]}`;
}

export function rate(bitsPerSecond) {
  if (!bitsPerSecond) return "–";
  if (bitsPerSecond >= 1e9) return `${(bitsPerSecond / 1e9).toFixed(2)} Gbit/s`;
  return `${(bitsPerSecond / 1e6).toFixed(1)} Mbit/s`;
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 90) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  if (seconds < 5400) return `${(seconds / 60).toFixed(0)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

export const clock = (epoch) => (epoch ? new Date(epoch * 1000).toISOString().replace("T", " ").slice(0, 19) : "–");

// Horizontal bar charts in SVG: one row per name, one bar per series.
import { h, s } from "./dom.js";
import { t } from "./i18n.js";

export function barChart({ rows, series, format, titleKey }) {
  const rowH = 16 * series.length + 10;
  const left = 90, width = 260, height = rows.length * rowH + 24;
  const max = Math.max(1e-12, ...rows.flatMap((r) => series.map((sr) => r[sr.field] || 0)));
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${left + width + 70} ${height}`, width: "100%", "data-chart": titleKey });
  rows.forEach((row, i) => {
    const y = i * rowH + 4;
    svg.append(s("text", { x: 0, y: y + rowH / 2 }, row.name));
    series.forEach((sr, j) => {
      const value = row[sr.field] || 0;
      const w = (value / max) * width;
      svg.append(s("rect", { x: left, y: y + j * 16, width: Math.max(w, 1), height: 13, class: `b${j}` },
        s("title", {}, `${row.name} ${t(sr.key)}: ${format(value)}`)));
      svg.append(s("text", { x: left + w + 4, y: y + j * 16 + 11 }, format(value)));
    });
  });
  svg.append(s("line", { class: "axis", x1: left, x2: left, y1: 0, y2: height - 20 }));
  const legend = h("div", { class: "legend" },
    series.map((sr, j) => h("span", {}, h("i", { class: `b${j}`, style: `background:${["var(--primary)", "var(--backup)", "var(--degraded)"][j]}` }), t(sr.key))));
  return h("figure", { class: "figure" }, svg, series.length > 1 ? legend : null);
}

"""``register.html``: the month's exports as one printable page (no script, print CSS)."""

from __future__ import annotations

from html import escape
from typing import Any

from onecluster.register._exports import COLUMNS, text_of

__all__ = ["render_html"]

_STYLE = """
body { font: 10pt/1.35 system-ui, sans-serif; margin: 1.5em; color: #111; }
h1 { font-size: 15pt; margin: 0 0 .3em; }
dl { display: grid; grid-template-columns: max-content auto; gap: .1em 1em; margin: 0 0 1em; }
dt { font-weight: 600; }
dd { margin: 0; font-family: ui-monospace, monospace; word-break: break-all; }
table { border-collapse: collapse; width: 100%; font-size: 8pt; }
th, td { border: 1px solid #999; padding: 2px 4px; vertical-align: top; text-align: left; }
th { background: #eee; }
td { word-break: break-word; }
tr.failed td, tr.refused td { background: #fdecea; }
tr.in-progress td { background: #fff8e1; }
.empty { font-style: italic; }
@page { size: A3 landscape; margin: 12mm; }
@media print {
  body { margin: 0; }
  thead { display: table-header-group; }
  tr { break-inside: avoid; }
  th { background: #eee !important; -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
"""


def render_html(header: dict[str, Any], rows: list[dict[str, Any]], fingerprint: str) -> str:
    """The page: what the bundle covers (from its signed ``header``), then one row per export."""
    head = header["head"]
    facts = [
        ("month (UTC)", header["month"]),
        ("register", header["origin"]),
        ("entries", f"{header['count']} (seq {header['first_seq']} to {header['last_seq']})"
         if header["count"] else "0"),
        ("exports", str(len(rows))),
        ("signed tree head", f"size {head['size']}, root {head['root']}"),
        ("previous month's head",
         f"size {header['previous']['size']}, root {header['previous']['root']}"
         if header.get("previous") else "none"),
        ("entries.jsonl SHA-256", header["entries_sha256"]),
        ("public key fingerprint (SHA-256)", fingerprint),
        ("generated at", header["generated_at"]),
    ]  # fmt: skip
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Export register {escape(header['month'])}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>Export register — {escape(header['month'])}</h1>",
        "<dl>",
        *(f"<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>" for k, v in facts),
        "</dl>",
        "<p>Check this bundle with <code>onecluster export verify DIR --public-key KEY</code>;"
        " this page is a view of <code>entries.jsonl</code>, which the signatures cover.</p>",
        "<table><thead><tr>",
        *(f"<th>{escape(column.replace('_', ' '))}</th>" for column in COLUMNS),
        "</tr></thead><tbody>",
    ]
    for row in rows:
        status = str(row["status"]).replace(" ", "-")
        cells = "".join(f"<td>{escape(text_of(row[column]))}</td>" for column in COLUMNS)
        out.append(f'<tr class="{escape(status)}">{cells}</tr>')
    if not rows:
        out.append(
            f'<tr><td class="empty" colspan="{len(COLUMNS)}">no exports this month</td></tr>'
        )
    out += ["</tbody></table>", "</body></html>", ""]
    return "\n".join(out)

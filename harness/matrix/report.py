"""The results of a matrix run: results.json, junit.xml and a self-contained report.html.

`results.json` has a `cells` list; each row carries the cell's dimensions, `verdict` (pass |
fail | not run: the cell's client library is not installed, the reason says how to install
it; grey, not red, and a JUnit "skipped"), `reason` (the first violation, or a summary of a
passing run), the steps with their time to full ownership, the exact client versions, and
the ownership windows the timeline is drawn from, so that a later `--rerun-failed` can redraw
cells it did not run again.

`report.html` needs no network and no script: the grid is a table (one row per cell without its
backend, one column per backend) coloured by verdict with the reason in the cell's tooltip; every
cell links to its section, where the timeline of who owned which partition when is drawn as
inline SVG next to the reference Kafka cell's: one colour per client (the same colours as
`groupshift groups migration --plot`, `tools.groups.plot.client_colours`), classic-protocol
owners hatched as in that plot. A Kafka Connect cell's lanes are its connectors and tasks, named
by the row's `lanes` (harness/matrix/connect_scenario.py), not partitions.
"""

from __future__ import annotations

import html
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from harness.matrix.grid import Cell, Grid
from harness.matrix.runtime import NOT_RUN
from harness.matrix.scenarios import PARTITIONS, CellResult
from tools.groups.plot import client_colours


def result_row(r: CellResult) -> dict[str, Any]:
    base = r.t0
    windows = []
    if r.verdict_detail is not None:
        for p, ws in sorted(r.verdict_detail.windows.items()):
            for w in ws:
                windows.append(
                    {
                        "member": w.member,
                        "partition": p,
                        "start": round(w.start - base, 3),
                        "end": round(w.end - base, 3),
                    }
                )
    members = {
        m.name: {"client": m.client, "protocol": m.protocol, "instance_id": m.instance_id} for m in r.members
    }
    row: dict[str, Any] = {
        "id": r.cell.id,
        **r.cell.dimensions(),
        "verdict": r.verdict,
        "reason": r.reason,
        "seconds": round(r.seconds, 1),
        "versions": r.versions,
        "steps": [{**s.to_json(), "started": round(s.started - base, 3)} for s in r.steps],
        "members": members,
        "windows": windows,
        "duration": round(r.t1 - r.t0, 3),
    }
    if r.lanes:
        row["lanes"] = list(r.lanes)
    if r.verdict_detail is not None:
        v = r.verdict_detail
        row["figures"] = {
            "records": v.records,
            "reads": v.reads,
            "duplicates": v.duplicates,
            "handovers": v.handovers,
        }
    return row


def write_all(
    out_dir: Path,
    grid: Grid,
    rows: list[dict[str, Any]],
    results: list[CellResult],
    wall: float,
    runtime: str,
) -> None:
    passed = sum(r["verdict"] == "pass" for r in rows)
    not_run = sum(r["verdict"] == NOT_RUN for r in rows)
    summary = {"cells": len(rows), "passed": passed, "failed": len(rows) - passed - not_run}
    if not_run:  # the key appears only when a cell was not run, as in earlier results.json files
        summary["not_run"] = not_run
    doc = {
        "grid": grid.name,
        "runtime": runtime,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "wall_seconds": round(wall, 1),
        "summary": summary,
        "cells": rows,
    }
    (out_dir / "results.json").write_text(json.dumps(doc, indent=1))
    (out_dir / "junit.xml").write_text(junit(grid.name, rows, wall))
    (out_dir / "report.html").write_text(render_html(doc))


def junit(name: str, rows: list[dict[str, Any]], wall: float) -> str:
    failures = sum(r["verdict"] not in ("pass", NOT_RUN) for r in rows)
    suite = ET.Element(
        "testsuite",
        name=f"groupshift-matrix-{name}",
        tests=str(len(rows)),
        failures=str(failures),
        skipped=str(sum(r["verdict"] == NOT_RUN for r in rows)),
        time=f"{wall:.1f}",
    )
    for r in rows:
        case = ET.SubElement(
            suite, "testcase", classname=f"matrix.{r['backend']}", name=r["id"], time=f"{r['seconds']:.1f}"
        )
        if r["verdict"] == NOT_RUN:
            ET.SubElement(case, "skipped", message=r["reason"][:500]).text = r["reason"]
        elif r["verdict"] != "pass":
            ET.SubElement(case, "failure", message=r["reason"][:500]).text = r["reason"]
        else:
            ET.SubElement(case, "system-out").text = r["reason"]
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)


# -- html --------------------------------------------------------------------------------------


def _anchor(cell_id: str) -> str:
    return "cell-" + "".join(ch if ch.isalnum() else "-" for ch in cell_id)


def timeline_svg(row: dict[str, Any], width: int = 560) -> str:
    """Who owned which partition when: one lane per partition, one colour per client, classic
    owners hatched, dashed lines where a step began (labelled with its time to full ownership)."""
    lane, top, left, right = 18, 22, 34, 10
    # a Kafka Connect cell's lanes are its connectors and tasks, named (`lanes`)
    names = [str(n) for n in row.get("lanes", [])]
    if names:
        left = 8 + 7 * max(len(n) for n in names)

    def lane_name(p: int) -> str:
        return names[p] if p < len(names) else f"p{p}"

    partitions = max([len(names) or PARTITIONS, *[w["partition"] + 1 for w in row.get("windows", [])]])
    members = sorted(row.get("members", {}))
    per_row = 2
    legend_rows = (len(members) + per_row - 1) // per_row
    axis = top + lane * partitions  # the time axis' line; its ticks and title below it
    height = axis + 34 + 16 * legend_rows
    span = max([row.get("duration", 1.0), *[w["end"] for w in row.get("windows", [])], 1.0])
    scale = (width - left - right) / span
    info_of: dict[str, dict[str, Any]] = row.get("members", {})
    by_client = client_colours(str(info_of[m].get("client", m)) for m in members)
    colour = {m: by_client[str(info_of[m].get("client", m))] for m in members}
    classic = {m for m in members if info_of[m].get("protocol") == "classic"}
    hatch = "hatch-" + "".join(ch if ch.isalnum() else "-" for ch in str(row.get("id", "")))
    out = [
        f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="partition ownership over time">',
        f'<defs><pattern id="{hatch}" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#000" '
        'stroke-width="1.2" stroke-opacity="0.55"/></pattern></defs>',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fff"/>',
    ]
    for p in range(partitions):
        y = top + p * lane
        out.append(
            f'<text x="4" y="{y + lane - 5}" font-size="12" fill="#333">{html.escape(lane_name(p))}</text>'
        )
        out.append(f'<line x1="{left}" y1="{y + lane}" x2="{width - right}" y2="{y + lane}" stroke="#eee"/>')
    for w in row.get("windows", []):
        x = left + w["start"] * scale
        bar = max((w["end"] - w["start"]) * scale, 1.0)
        y = top + w["partition"] * lane + 2
        tip = html.escape(f"{w['member']} owns {lane_name(w['partition'])} {w['start']:.2f}s-{w['end']:.2f}s")
        out.append(
            f'<rect class="own" x="{x:.1f}" y="{y}" width="{bar:.1f}" height="{lane - 4}" '
            f'fill="{colour.get(w["member"], "#999")}"><title>{tip}</title></rect>'
        )
        if w["member"] in classic:
            out.append(
                f'<rect class="classic" x="{x:.1f}" y="{y}" width="{bar:.1f}" height="{lane - 4}" '
                f'fill="url(#{hatch})" pointer-events="none"/>'
            )
    for s in row.get("steps", []):
        x = left + s["started"] * scale
        took = s.get("seconds_to_full_ownership")
        label = html.escape(f"{s['label']}" + (f" ({took:.1f}s)" if took is not None else " (never)"))
        out.append(
            f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{top + lane * partitions}" '
            f'stroke="#333" stroke-dasharray="3,2"><title>{label}</title></line>'
        )
    title = "connector / task" if names else "partition"
    out.append(f'<text x="4" y="{top - 8}" font-size="11" fill="#333">{title}</text>')
    out.append(f'<line x1="{left}" y1="{axis}" x2="{width - right}" y2="{axis}" stroke="#888"/>')
    ticks = max(int(span // 5), 1)
    for i in range(0, int(span) + 1, 5 * ticks if span > 60 else 5):
        x = left + i * scale
        out.append(f'<line x1="{x:.1f}" y1="{axis}" x2="{x:.1f}" y2="{axis + 4}" stroke="#888"/>')
        out.append(
            f'<text x="{x:.1f}" y="{axis + 15}" font-size="11" fill="#333" text-anchor="middle">{i}s</text>'
        )
    out.append(
        f'<text x="{width - right}" y="{axis + 15}" font-size="11" fill="#333" text-anchor="end">'
        "time since the cell began</text>"
    )
    column = (width - left) // per_row
    for i, m in enumerate(members):
        info = row["members"][m]
        text = html.escape(f"{m} {info['client']} {info['protocol']}")
        lx = left + (i % per_row) * column
        ly = axis + 34 + 16 * (i // per_row)
        out.append(f'<rect x="{lx}" y="{ly - 10}" width="11" height="11" fill="{colour[m]}"/>')
        if m in classic:
            out.append(f'<rect x="{lx}" y="{ly - 10}" width="11" height="11" fill="url(#{hatch})"/>')
        out.append(f'<text x="{lx + 15}" y="{ly}" font-size="12">{text}</text>')
    out.append("</svg>")
    return "".join(out)


CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table.grid{border-collapse:collapse;font-size:12px}
table.grid th,table.grid td{border:1px solid #ccc;padding:3px 6px;text-align:left}
td.pass{background:#b7e1b0} td.fail{background:#f4a6a6} td.none{background:#eee;color:#999}
td.not-run{background:#e4e4e4;color:#444}
ul.legend{list-style:none;padding:0;font-size:13px} ul.legend li{display:inline-block;margin-right:1.2em}
ul.legend span{display:inline-block;width:1em;height:1em;vertical-align:middle;margin-right:.3em}
td.verdict a{color:#000;text-decoration:none;display:block}
section.cell{border-top:1px solid #ddd;margin-top:1em;padding-top:.5em}
.pair{display:flex;gap:1.5em;flex-wrap:wrap}
.pair figure{margin:0} figcaption{font-size:12px;margin-bottom:4px}
.reason{font-size:12px;max-width:1200px}
.fail-text{color:#a00}
"""


def _verdict_class(verdict: str) -> str:
    """The CSS class of a verdict ("not run" has a space, which a class cannot)."""
    return verdict.replace(" ", "-")


LEGEND = (
    "<ul class='legend' id='legend'>"
    "<li><span style='background:#b7e1b0'></span>pass: every check held</li>"
    "<li><span style='background:#f4a6a6'></span>fail: a check was violated (hover for the first one)</li>"
    "<li><span style='background:#e4e4e4'></span>not run: the client library is not installed "
    "(hover for the install command)</li>"
    "<li><span style='background:#eee'></span>-: the cell does not apply to this backend</li></ul>"
    "<p class='reason'>Timelines: one lane per partition, a bar while a client owns it (one colour "
    "per client library, hatched when it uses the classic protocol), dashed lines where a scenario "
    "step began (hover for its time to full ownership).</p>"
)


def render_html(doc: dict[str, Any]) -> str:
    rows: list[dict[str, Any]] = doc["cells"]
    by_id = {r["id"]: r for r in rows}
    backends = sorted({r["backend"] for r in rows}, key=lambda b: (not b.startswith("groupshift"), b))
    keys: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        key = r["id"].rsplit("/", 1)[0]
        keys[key][r["backend"]] = r
    s = doc["summary"]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>groupshift matrix: {html.escape(doc['grid'])}</title><style>{CSS}</style></head><body>",
        f"<h1>groupshift matrix: {html.escape(doc['grid'])}</h1>",
        f"<p id='summary'>{s['cells']} cells, {s['passed']} passed, {s['failed']} failed, "
        f"{s.get('not_run', 0)} not run; "
        f"runtime {html.escape(doc['runtime'])}; wall time {doc['wall_seconds']:.0f}s; "
        f"finished {doc['finished']}</p>",
        LEGEND,
        "<table class='grid' id='grid'><thead><tr><th>client</th><th>protocol</th><th>assignor</th>"
        "<th>membership</th><th>scenario</th><th>policy</th>",
        *[f"<th>{html.escape(b)}</th>" for b in backends],
        "</tr></thead><tbody>",
    ]
    for key, cols in keys.items():
        dims = key.split("/")
        parts.append("<tr>" + "".join(f"<td>{html.escape(d)}</td>" for d in dims))
        for b in backends:
            got = cols.get(b)
            if got is None:
                parts.append("<td class='none'>-</td>")
                continue
            r = got
            tip = html.escape(f"{r['verdict']}: {r['reason']}", quote=True)
            verdict_class = _verdict_class(r["verdict"])
            parts.append(
                f'<td class=\'verdict {verdict_class}\' title="{tip}" data-cell="{html.escape(r["id"])}">'
                f"<a href='#{_anchor(r['id'])}'>{r['verdict']} {r['seconds']:.0f}s</a></td>"
            )
        parts.append("</tr>")
    parts.append("</tbody></table>")
    for key, cols in keys.items():
        main = next((cols[b] for b in backends if b.startswith("groupshift") and b in cols), None)
        first = main or next(iter(cols.values()))
        parts.append(f"<section class='cell' id='{_anchor(first['id'])}'><h3>{html.escape(key)}</h3>")
        for r in cols.values():
            if r is not first:
                parts.append(f"<a id='{_anchor(r['id'])}'></a>")
        parts.append("<div class='pair'>")
        for b in backends:
            got = cols.get(b)
            if got is None:
                continue
            r = got
            versions = ", ".join(f"{k} = {v}" for k, v in r.get("versions", {}).items())
            cls = "" if r["verdict"] in ("pass", NOT_RUN) else " fail-text"
            steps = "; ".join(
                f"{st['label']}: "
                + (
                    f"{st['seconds_to_full_ownership']:.1f}s"
                    if st["seconds_to_full_ownership"] is not None
                    else "never"
                )
                for st in r.get("steps", [])
            )
            parts.append(
                f"<figure><figcaption><b>{html.escape(b)}</b> "
                f"<span class='{_verdict_class(r['verdict'])}{cls}'>{r['verdict']}</span> "
                f"({html.escape(versions)})"
                f"<div class='reason{cls}'>{html.escape(r['reason'])}</div>"
                f"<div class='reason'>{html.escape(steps)}</div></figcaption>"
                f"{timeline_svg(r)}</figure>"
            )
        parts.append("</div></section>")
    _ = by_id, Cell
    parts.append("</body></html>")
    return "".join(parts)

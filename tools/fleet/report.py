"""`report.html` of `groupshift fleet report`: one self-contained file (plots are PNGs inlined as
base64 data URIs, no script, no external resource), readable offline and attachable to a ticket.

Sections: the fleet at a glance (per cluster), readiness by cluster (the upgrade verdicts),
blockers by reason (the check that decided each negative verdict, upgrade and downgrade, named
in words: `blocker_label`), the blocked groups themselves (every NOT-READY, UNSAFE and
NEEDS-ACTION verdict with its reason and fix, the `groupshift check` table of the fleet), the
inputs that could not be read, the Kafka Streams groups (KIP-1071 streams groups and classic
Kafka Streams groups: type, members, active tasks, state), unowned partition-seconds per
membership change before the conversion, per migration step and after it (the groups that were
upgraded), and the worst groups by unowned time.

The page is built from small aggregates (`ReportData`), computed by Spark from the job's tables
(`from_tables`) or from plain rows (`from_rows`, the reference), so the driver never holds the
fleet's records.
"""

from __future__ import annotations

import base64
import html
import io
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

NEGATIVE = ("NOT-READY", "UNSAFE", "NEEDS-ACTION")
WORST = 20
BLOCKED_ROWS = 2000  # blocked verdicts listed in the page (the verdicts table has them all)
PROBLEM_ROWS = 200
STREAMS_ROWS = 2000  # Kafka Streams groups listed in the page (the facts table has them all)

# The checks of tools/check/rules.py that can decide a negative verdict, in words. Record checks
# (`record-N`, downgrades to a Kafka release) are named after their record type.
BLOCKER_LABELS = {
    "policy": "the migration policy (group.consumer.migration.policy) forbids it",
    "protocol-type": "not a consumer group (Connect, Streams or a custom protocol)",
    "size": "more members than the group size limit allows",
    "custom-assignor": "a client-side assignor's userData in the assignment (KAFKA-18134)",
    "embedded-protocol": "a member's subscription does not parse",
    "server": "the server does not serve the KIP-848 consumer protocol",
    "regex": "a regular-expression subscription the server cannot take over",
    "assignor": "the classic members share no assignor",
    "partition": "another group's record in the same __consumer_offsets partition breaks its load",
    "other": "other",
}


def blocker_label(blocker: str | None) -> str:
    """A check id (`size`, `record-3`, ...) as the sentence the report shows."""
    from tools.check.rules import RECORD_NAMES

    if blocker is None:
        return BLOCKER_LABELS["other"]
    if blocker.startswith("record-") and blocker[len("record-") :].isdigit():
        t = int(blocker[len("record-") :])
        return f"{RECORD_NAMES.get(t, f'type {t}')} records the target release skips or cannot load"
    return BLOCKER_LABELS.get(blocker, blocker)


_SEVERITY = {"UNSAFE": 0, "NOT-READY": 1, "NEEDS-ACTION": 2}


@dataclass
class ReportData:
    # cluster, groups, members, records, streams_groups, classic_streams_groups
    clusters: list[dict[str, Any]] = field(default_factory=list)
    readiness: list[dict[str, Any]] = field(default_factory=list)  # cluster, status, count
    blockers: list[dict[str, Any]] = field(default_factory=list)  # check, blocker, count
    migrations: list[dict[str, Any]] = field(default_factory=list)  # cluster, group, before, step, after
    worst: list[dict[str, Any]] = field(default_factory=list)  # health row + upgrade verdict
    problems: int = 0
    # cluster, group, type, size, check, verdict, blocker, reason, fix (the first BLOCKED_ROWS)
    blocked: list[dict[str, Any]] = field(default_factory=list)
    blocked_total: int = 0
    problem_rows: list[dict[str, Any]] = field(default_factory=list)  # cluster, file, offset, problem
    # cluster, group, type ("streams" or "classic"), size, tasks, state (the first STREAMS_ROWS)
    streams: list[dict[str, Any]] = field(default_factory=list)
    streams_total: int = 0


def _status(type_: str, verdict: str) -> str:
    if verdict != "READY":
        return "not ready"
    if type_ == "streams":
        return "streams group already"
    return "consumer group already" if type_ == "consumer" else "ready to upgrade"


def _check(direction: str, target: str | None) -> str:
    return "upgrade" if direction == "upgrade" else f"downgrade to {target}"


def from_rows(
    facts: Iterable[Mapping[str, Any]],
    verdicts: Iterable[Mapping[str, Any]],
    health: Iterable[Mapping[str, Any]],
) -> ReportData:
    """The aggregates from plain rows (the reference computation, small fleets)."""
    facts, verdicts, health = list(facts), list(verdicts), list(health)
    data = ReportData()
    per: dict[str, dict[str, Any]] = {}
    for f in facts:
        c = per.setdefault(
            f["cluster"],
            {"cluster": f["cluster"], "groups": 0, "members": 0, "records": 0, "streams_groups": 0,
             "classic_streams_groups": 0},
        )  # fmt: skip
        c["groups"] += 1
        c["members"] += f["size"]
        c["records"] += f["records"]
        if f["kafka_streams"]:
            c["streams_groups" if f["type"] == "streams" else "classic_streams_groups"] += 1
    data.clusters = sorted(per.values(), key=lambda c: c["cluster"])
    streams = sorted(
        (_streams_row(f) for f in facts if f["kafka_streams"]), key=lambda r: (r["cluster"], r["group"])
    )
    data.streams, data.streams_total = streams[:STREAMS_ROWS], len(streams)
    ready: Counter[tuple[str, str]] = Counter()
    blockers: Counter[tuple[str, str]] = Counter()
    upgrade: dict[tuple[str, str], Mapping[str, Any]] = {}
    for v in verdicts:
        if v["direction"] == "upgrade":
            ready[(v["cluster"], _status(v["type"], v["verdict"]))] += 1
            upgrade[(v["cluster"], v["group"])] = v
        if v["verdict"] in NEGATIVE:
            blockers[(_check(v["direction"], v["target"]), v["blocker"] or "other")] += 1
    data.readiness = [{"cluster": c, "status": s, "count": n} for (c, s), n in sorted(ready.items())]
    data.blockers = [{"check": c, "blocker": b, "count": n} for (c, b), n in sorted(blockers.items())]
    negative = sorted(
        (_blocked_row(v) for v in verdicts if v["verdict"] in NEGATIVE),
        key=lambda r: (_SEVERITY[r["verdict"]], r["cluster"], r["group"], r["check"]),
    )
    data.blocked, data.blocked_total = negative[:BLOCKED_ROWS], len(negative)
    data.migrations = [
        {
            "cluster": h["cluster"],
            "group": h["group"],
            "before": h["unowned_ps_per_change_before"],
            "step": h["unowned_ps_per_step"],
            "after": h["unowned_ps_per_change_after"],
        }
        for h in health
        if h["conversion"] == "upgrade"
    ]
    alive = [h for h in health if not h["deleted"]]
    ranked = sorted(alive, key=lambda h: -(h["unowned_ps_before"] + h["unowned_ps_after"]))[:WORST]
    data.worst = [_worst_row(h, upgrade.get((h["cluster"], h["group"]))) for h in ranked]
    return data


def _streams_row(f: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "cluster": f["cluster"],
        "group": f["group"],
        "type": "streams" if f["type"] == "streams" else "classic",
        "size": f["size"],
        "tasks": f["tasks"],
        "state": f["state"],
    }


def _blocked_row(v: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "cluster": v["cluster"],
        "group": v["group"],
        "type": v["type"],
        "size": v["size"],
        "check": _check(v["direction"], v["target"]),
        "verdict": v["verdict"],
        "blocker": v["blocker"],
        "reason": v["reason"],
        "fix": v["fix"],
    }


def _worst_row(h: Mapping[str, Any], v: Mapping[str, Any] | None) -> dict[str, Any]:
    return {
        "cluster": h["cluster"],
        "group": h["group"],
        "unowned_ps": h["unowned_ps_before"] + h["unowned_ps_after"],
        "rebalances_per_hour": h["rebalances_per_hour"],
        "mean_time_to_stable_s": h["mean_time_to_stable_s"],
        "conversion": h["conversion"],
        "verdict": v["verdict"] if v else None,
        "reason": v["reason"] if v else None,
    }


def from_tables(tables: Mapping[str, DataFrame]) -> ReportData:
    """The aggregates computed by Spark; only they reach the driver."""
    from pyspark.sql import functions as F

    data = ReportData()
    facts, verdicts, health = tables.get("facts"), tables.get("verdicts"), tables.get("health")
    if facts is not None:
        data.clusters = [
            r.asDict()
            for r in facts.groupBy("cluster")
            .agg(
                F.count(F.lit(1)).alias("groups"),
                F.sum("size").alias("members"),
                F.sum("records").alias("records"),
                F.sum(F.when(F.col("kafka_streams") & (F.col("type") == "streams"), 1).otherwise(0)).alias(
                    "streams_groups"
                ),
                F.sum(F.when(F.col("kafka_streams") & (F.col("type") != "streams"), 1).otherwise(0)).alias(
                    "classic_streams_groups"
                ),
            )
            .orderBy("cluster")
            .collect()
        ]
        kafka_streams = facts.filter(F.col("kafka_streams"))
        data.streams_total = kafka_streams.count()
        data.streams = [
            _streams_row(r.asDict())
            for r in kafka_streams.orderBy("cluster", "group")
            .select("cluster", "group", "type", "size", "tasks", "state")
            .limit(STREAMS_ROWS)
            .collect()
        ]
    upgrade = None
    if verdicts is not None:
        upgrade = verdicts.filter(F.col("direction") == "upgrade")
        status = (
            F.when(F.col("verdict") != "READY", "not ready")
            .when(F.col("type") == "streams", "streams group already")
            .when(F.col("type") == "consumer", "consumer group already")
            .otherwise("ready to upgrade")
        )
        data.readiness = [
            r.asDict()
            for r in upgrade.groupBy("cluster", status.alias("status"))
            .agg(F.count(F.lit(1)).alias("count"))
            .orderBy("cluster", "status")
            .collect()
        ]
        check = F.when(F.col("direction") == "upgrade", "upgrade").otherwise(
            F.concat(F.lit("downgrade to "), F.col("target"))
        )
        data.blockers = [
            r.asDict()
            for r in verdicts.filter(F.col("verdict").isin(*NEGATIVE))
            .groupBy(check.alias("check"), F.coalesce(F.col("blocker"), F.lit("other")).alias("blocker"))
            .agg(F.count(F.lit(1)).alias("count"))
            .orderBy("check", "blocker")
            .collect()
        ]
        negative = verdicts.filter(F.col("verdict").isin(*NEGATIVE))
        verdict = F.col("verdict")
        severity = F.when(verdict == "UNSAFE", 0).when(verdict == "NOT-READY", 1).otherwise(2)
        data.blocked_total = negative.count()
        data.blocked = [
            _blocked_row(r.asDict())
            for r in negative.orderBy(severity, "cluster", "group", "direction", "target")
            .limit(BLOCKED_ROWS)
            .collect()
        ]
    if health is not None:
        data.migrations = [
            r.asDict()
            for r in health.filter(F.col("conversion") == "upgrade")
            .select(
                "cluster",
                "group",
                F.col("unowned_ps_per_change_before").alias("before"),
                F.col("unowned_ps_per_step").alias("step"),
                F.col("unowned_ps_per_change_after").alias("after"),
            )
            .orderBy("cluster", "group")
            .limit(20_000)
            .collect()
        ]
        ranked = health.filter(~F.col("deleted")).withColumn(
            "unowned_ps", F.col("unowned_ps_before") + F.col("unowned_ps_after")
        )
        if upgrade is not None:
            ranked = ranked.join(
                upgrade.select("cluster", "group", "verdict", "reason"), ["cluster", "group"], "left"
            )
        else:
            ranked = ranked.withColumn("verdict", F.lit(None)).withColumn("reason", F.lit(None))
        data.worst = [
            r.asDict()
            for r in ranked.orderBy(F.desc("unowned_ps"), "cluster", "group")
            .select(
                "cluster",
                "group",
                "unowned_ps",
                "rebalances_per_hour",
                "mean_time_to_stable_s",
                "conversion",
                "verdict",
                "reason",
            )
            .limit(WORST)
            .collect()
        ]
    problems = tables.get("problems")
    if problems is not None:
        data.problems = problems.count()
        data.problem_rows = [
            r.asDict()
            for r in problems.orderBy("cluster", "file", "offset")
            .select("cluster", "file", "offset", "problem")
            .limit(PROBLEM_ROWS)
            .collect()
        ]
    return data


# --- drawing -------------------------------------------------------------------------------------


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _img(b64: str, alt: str) -> str:
    return f'<img class="plot" alt="{html.escape(alt)}" src="data:image/png;base64,{b64}">'


STATUS_COLOURS = {
    "consumer group already": "#4c78a8",
    "streams group already": "#72b7b2",
    "ready to upgrade": "#54a24b",
    "not ready": "#e45756",
}


def plot_readiness(data: ReportData) -> str | None:
    if not data.readiness:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    clusters = sorted({r["cluster"] for r in data.readiness})
    fig, ax = plt.subplots(figsize=(max(5.0, 0.6 * len(clusters) + 2), 3.6))
    bottom = [0] * len(clusters)
    for status, colour in STATUS_COLOURS.items():
        counts = [
            sum(r["count"] for r in data.readiness if r["cluster"] == c and r["status"] == status)
            for c in clusters
        ]
        ax.bar(clusters, counts, bottom=bottom, label=status, color=colour)
        bottom = [b + n for b, n in zip(bottom, counts, strict=True)]
    ax.set_ylabel("groups")
    ax.set_title("Upgrade readiness by cluster")
    ax.legend(fontsize=8)
    ax.tick_params(axis="x", rotation=45)
    return _png(fig)


def plot_blockers(data: ReportData) -> str | None:
    if not data.blockers:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(data.blockers, key=lambda r: r["count"])
    labels = [f"{r['check']}: {blocker_label(r['blocker'])}" for r in rows]
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(rows) + 1.2))
    ax.barh(labels, [r["count"] for r in rows], color="#e45756")
    ax.set_xlabel("groups")
    ax.set_title("Blockers by reason")
    return _png(fig)


def plot_migrations(data: ReportData) -> str | None:
    rows = data.migrations
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    series = {
        "per change, before": [r["before"] for r in rows if r["before"] is not None],
        "per migration step": [r["step"] for r in rows if r["step"] is not None],
        "per change, after": [r["after"] for r in rows if r["after"] is not None],
    }
    means = [sum(v) / len(v) if v else 0.0 for v in series.values()]
    left.bar(list(series), means, color=["#e45756", "#f58518", "#54a24b"])
    left.set_ylabel("unowned partition-seconds (mean)")
    left.set_title(f"Unowned time, {len(rows)} upgraded groups")
    left.tick_params(axis="x", labelsize=8)
    pairs = [(r["before"], r["after"]) for r in rows if r["before"] is not None and r["after"] is not None]
    if pairs:
        xs, ys = zip(*pairs, strict=True)
        right.scatter(xs, ys, s=14, color="#4c78a8")
        top = max(max(xs), max(ys), 1e-3)
        right.plot([0, top], [0, top], color="#999999", linewidth=0.8, linestyle="--")
    right.set_xlabel("before the conversion (per change)")
    right.set_ylabel("after (per change)")
    right.set_title("Per group: before vs after")
    return _png(fig)


# --- the page -------------------------------------------------------------------------------------

CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
h1{font-size:1.5em} h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85em}
td,th{border:1px solid #ddd;padding:.25em .5em;text-align:left}
th{background:#f4f4f4} td.n{text-align:right} img.plot{max-width:100%;display:block;margin:.5em 0}
.note{color:#666;font-size:.85em}
"""


def _table(rows: list[dict[str, Any]], columns: list[tuple[str, str]], table_id: str | None = None) -> str:
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title in columns)
    body = []
    for r in rows:
        cells = []
        for key, _ in columns:
            v = r.get(key)
            if isinstance(v, float):
                cells.append(f'<td class="n">{v:,.1f}</td>')
            elif isinstance(v, int):
                cells.append(f'<td class="n">{v:,}</td>')
            else:
                cells.append(f"<td>{html.escape('' if v is None else str(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    ident = f' id="{html.escape(table_id)}"' if table_id else ""
    return f"<table{ident}><tr>{head}</tr>{''.join(body)}</table>"


def render(data: ReportData, title: str = "groupshift fleet report") -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        '<h2 id="clusters">The fleet</h2>',
        _table(
            data.clusters,
            [
                ("cluster", "cluster"),
                ("groups", "groups"),
                ("members", "members"),
                ("records", "records read"),
                ("streams_groups", "streams groups"),
                ("classic_streams_groups", "classic Kafka Streams groups"),
            ],
        ),
    ]
    if data.problems:
        parts.append(
            f'<p class="note">{data.problems} input(s) or part(s) of segment files could not be read: '
            'see <a href="#problems">the inputs not read</a>.</p>'
        )
    sections = (
        ("readiness", "Readiness by cluster", plot_readiness(data)),
        ("blockers", "Blockers by reason", plot_blockers(data)),
        ("migration", "Unowned time before, during and after migration", plot_migrations(data)),
    )
    for anchor, heading, png in sections:
        parts.append(f'<h2 id="{anchor}">{html.escape(heading)}</h2>')
        parts.append(_img(png, heading) if png else '<p class="note">nothing to show</p>')
    if data.blockers:
        labelled = [{**r, "blocker": blocker_label(r["blocker"])} for r in data.blockers]
        parts.append(_table(labelled, [("check", "check"), ("blocker", "blocked by"), ("count", "groups")]))
    parts.append('<h2 id="blocked">Blocked groups</h2>')
    if data.blocked:
        if data.blocked_total > len(data.blocked):
            parts.append(
                f'<p class="note">the first {len(data.blocked):,} of {data.blocked_total:,}; the '
                "<code>verdicts</code> table has them all.</p>"
            )
        labelled = [{**r, "blocker": blocker_label(r["blocker"])} for r in data.blocked]
        parts.append(
            _table(
                labelled,
                [
                    ("cluster", "cluster"),
                    ("group", "group"),
                    ("type", "type"),
                    ("size", "members"),
                    ("check", "check"),
                    ("verdict", "verdict"),
                    ("blocker", "blocked by"),
                    ("reason", "reason"),
                    ("fix", "fix"),
                ],
                table_id="blocked-groups",
            )
        )
    else:
        parts.append('<p class="note">no group is NOT-READY, UNSAFE or NEEDS-ACTION</p>')
    parts.append('<h2 id="streams">Kafka Streams groups</h2>')
    if data.streams:
        if data.streams_total > len(data.streams):
            parts.append(
                f'<p class="note">the first {len(data.streams):,} of {data.streams_total:,}; the '
                "<code>facts</code> table has them all.</p>"
            )
        parts.append(
            _table(
                data.streams,
                [
                    ("cluster", "cluster"),
                    ("group", "group"),
                    ("type", "type"),
                    ("size", "members"),
                    ("tasks", "active tasks"),
                    ("state", "state"),
                ],
                table_id="streams-groups",
            )
        )
    else:
        parts.append('<p class="note">no streams group and no classic Kafka Streams group</p>')
    parts.append('<h2 id="worst">The worst groups (unowned partition-seconds)</h2>')
    parts.append(
        _table(
            data.worst,
            [
                ("cluster", "cluster"),
                ("group", "group"),
                ("unowned_ps", "unowned partition-s"),
                ("rebalances_per_hour", "rebalances/h"),
                ("mean_time_to_stable_s", "time to stable (s)"),
                ("conversion", "conversion"),
                ("verdict", "upgrade verdict"),
                ("reason", "reason"),
            ],
        )
    )
    if data.problem_rows:
        parts.append('<h2 id="problems">Inputs not read</h2>')
        parts.append(
            _table(
                data.problem_rows,
                [("cluster", "cluster"), ("file", "file"), ("offset", "offset"), ("problem", "problem")],
            )
        )
    parts.append("</body></html>")
    return "\n".join(parts)

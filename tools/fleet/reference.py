"""The fleet job's tables computed in plain Python, without Spark: the reference the Spark job is
tested against (row for row), and a fallback for a small fleet on a machine without Java.

It shares only the per-record and per-group building blocks with the job (the records/ codecs,
`groupshift check`'s facts and rules, the health fold); reading, compaction and grouping are
written again here the obvious way: every record of a partition in offset order into a dict.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from tools.fleet.decode import Problem, iter_segment, key_group
from tools.fleet.health import events_of, health
from tools.fleet.inputs import Cluster
from tools.fleet.judge import judge
from tools.fleet.report import ReportData, from_rows


def facts_and_verdicts(
    clusters: Sequence[Cluster], downgrade_targets: Sequence[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    facts: list[dict[str, Any]] = []
    verdicts: list[dict[str, Any]] = []
    for c in clusters:
        # (partition, key) -> (offset, group, value); records per (partition, key)
        live: dict[tuple[int, bytes], tuple[int, str, bytes | None]] = {}
        counts: dict[tuple[int, bytes], int] = defaultdict(int)
        for partition, path in sorted(c.segments):
            with open(path, "rb") as f:
                data = f.read()
            for item in iter_segment(data):
                if isinstance(item, Problem):
                    continue
                offset, _ts, key, value = item
                if key is None:
                    continue
                try:
                    _rtype, group = key_group(key)
                except (ValueError, UnicodeDecodeError):
                    continue
                old = live.get((partition, key))
                if old is None or offset > old[0]:
                    live[(partition, key)] = (offset, group, value)
                counts[(partition, key)] += 1
        by_partition: dict[int, list[tuple[int, bytes, bytes | None]]] = defaultdict(list)
        records: dict[str, int] = defaultdict(int)
        for (partition, key), (offset, group, value) in live.items():
            by_partition[partition].append((offset, key, value))
            records[group] += counts[(partition, key)]
        for partition, items in sorted(by_partition.items()):
            items.sort(key=lambda x: x[0])
            entries = [(k, v) for _o, k, v in items]
            names = c.topic_ids()
            for row in judge(c.name, entries, records, c.settings, downgrade_targets, names, partition):
                vs = row.pop("verdicts")
                row.pop("problems")
                if row.pop("live"):
                    facts.append(row)
                for v in vs:
                    verdicts.append(
                        {
                            "cluster": row["cluster"],
                            "group": row["group"],
                            "type": row["type"],
                            "size": row["size"],
                            **v,
                        }
                    )
    return facts, verdicts


def health_rows(clusters: Sequence[Cluster]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for c in clusters:
        events: list[dict[str, Any]] = []
        for path in c.events:
            with open(path, encoding="utf-8", errors="replace") as f:
                events += events_of(f.read().splitlines(), c.name)
        if not events:
            continue
        window = (min(e["ts"] for e in events), max(e["ts"] for e in events))
        by_group: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for e in events:
            by_group[e["group"]].append(e)
        for group, evs in by_group.items():
            out.append(health(c.name, group, evs, window))
    return out


def write_reference(
    clusters: Sequence[Cluster], out_dir: str, downgrade_targets: Sequence[str]
) -> ReportData:
    """`groupshift fleet report --reference`: the tables as Parquet (pyarrow, same schemas as the
    Spark job's) and the report's aggregates."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    from tools.fleet.health import HEALTH_SCHEMA
    from tools.fleet.job import input_problems
    from tools.fleet.judge import FACTS_SCHEMA, VERDICT_FIELDS
    from tools.fleet.schema import arrow_schema

    facts, verdicts = facts_and_verdicts(clusters, downgrade_targets)
    health = health_rows(clusters)
    verdict_ddl = "cluster string, `group` string, type string, size int, " + VERDICT_FIELDS
    for name, rows, ddl in (
        ("facts", facts, FACTS_SCHEMA),
        ("verdicts", verdicts, verdict_ddl),
        ("health", health, HEALTH_SCHEMA),
    ):
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
        table = pa.Table.from_pylist(rows, schema=arrow_schema(ddl))
        pq.write_table(table, os.path.join(out_dir, name, "part-0.parquet"))
    data = from_rows(facts, verdicts, health)
    data.problem_rows = [
        {"cluster": c, "file": f, "offset": o, "problem": m} for c, _p, f, o, m in input_problems(clusters)
    ]
    data.problems = len(data.problem_rows)
    return data

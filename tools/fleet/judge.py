"""One group's facts and verdicts from its live records: `groupshift check`'s own builders and
rules (tools.check.facts, tools.check.rules) called once per group, on a Spark worker or in
the plain-Python reference alike. Nothing here decides anything: it flattens the facts and the
verdicts into table rows (the Parquet schema of `groupshift fleet report`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tools.check.facts import GroupFacts, facts_from_entries
from tools.check.rules import CLASSIC_TARGET, Settings, Verdict, downgrade_verdict, upgrade_verdict

# The Parquet schemas (Spark DDL); `facts_json` keeps every fact `groupshift check --json` shows.
FACTS_SCHEMA = (
    "cluster string, `group` string, type string, protocol_type string, protocol string, "
    "assignor string, generation int, size int, classic_members int, consumer_members int, "
    "static_members int, clients array<string>, assignors array<string>, topics array<string>, "
    "regexes array<string>, committed_partitions int, records int, facts_json string"
)
VERDICT_FIELDS = (
    "direction string, target string, verdict string, blocker string, reason string, fix string, "
    "kafka_message string"
)
# `live` False: a deleted group (its GroupMetadata / ConsumerGroupMetadata tombstoned, only old
# records left in a log not compacted yet). It is no fleet group: no facts row and no upgrade or
# classic-protocol verdict (`groupshift check` skips it too); a coordinator release still reads
# its records, so its kafka-X.Y downgrade verdicts stay.
JUDGED_SCHEMA = (
    f"{FACTS_SCHEMA}, live boolean, verdicts array<struct<{VERDICT_FIELDS}>>, problems array<string>"
)

BLOCKING = ("refused", "unsafe", "needs-action")


def settings_for(configs: Mapping[str, str | None]) -> Settings:
    return Settings.from_configs(configs)


def _blocker(v: Verdict) -> str | None:
    """The name of the check that decided a negative verdict (policy, size, user-data, ...)."""
    for c in v.details:
        if c.status in BLOCKING:
            return c.name
    return None


def verdict_row(v: Verdict) -> dict[str, Any]:
    return {
        "direction": v.direction,
        "target": v.target if v.direction == "downgrade" else "consumer-protocol",
        "verdict": v.verdict,
        "blocker": _blocker(v),
        "reason": v.reason,
        "fix": v.fix,
        "kafka_message": v.kafka_message,
    }


def facts_row(f: GroupFacts, records: int) -> dict[str, Any]:
    members = f.members
    return {
        "cluster": f.cluster,
        "group": f.group,
        "type": f.type,
        "protocol_type": f.protocol_type,
        "protocol": f.protocol,
        "assignor": f.assignor,
        "generation": f.generation,
        "size": f.size,
        "classic_members": sum(1 for m in members if m.protocol == "classic"),
        "consumer_members": sum(1 for m in members if m.protocol == "consumer"),
        "static_members": len(f.static_members),
        "clients": sorted({m.software or "other" for m in members}),
        "assignors": sorted(
            {a for m in members for a in m.assignors} | {m.server_assignor or "" for m in members} - {""}
        ),
        "topics": sorted({t for m in members for t in m.subscribed_topics} | {t for t, _, _ in f.offsets}),
        "regexes": sorted(f.regexes),
        "committed_partitions": len(f.offsets),
        "records": records,
        "facts_json": json.dumps(f.to_json(), sort_keys=True, default=str),
    }


def judge(
    cluster: str,
    entries: Iterable[tuple[bytes, bytes | None]],
    records: int,
    configs: Mapping[str, str | None],
    downgrade_targets: Sequence[str],
    topic_names: Mapping[uuid.UUID, str] | None = None,
) -> list[dict[str, Any]]:
    """Rows (facts, `live`, their verdicts, the problems met) of the groups among `entries`: one
    group's live records in log order, as `facts_from_entries` replays them. Empty when nothing of
    the group is left (e.g. only records of a type the coordinator does not know)."""
    facts, problems = facts_from_entries(entries, cluster=cluster, topic_names=topic_names)
    settings = settings_for(configs)
    out = []
    for f in facts.values():
        row = facts_row(f, records)
        row["live"] = f.live
        if f.live:
            verdicts = [upgrade_verdict(f, settings)]
            verdicts += [downgrade_verdict(f, t, settings) for t in downgrade_targets]
        else:
            verdicts = [downgrade_verdict(f, t, settings) for t in downgrade_targets if t != CLASSIC_TARGET]
        row["verdicts"] = [verdict_row(v) for v in verdicts]
        row["problems"] = problems
        out.append(row)
    return out


DEFAULT_DOWNGRADE_TARGETS: tuple[str, ...] = (CLASSIC_TARGET,)

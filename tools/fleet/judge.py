"""The facts and verdicts of one `__consumer_offsets` partition's groups from its live records:
`groupshift check`'s own builders and rules (tools.check.facts, tools.check.rules) called once
per partition, as `check --log-dir` does, on a Spark worker or in the plain-Python reference
alike. Nothing here decides anything: it flattens the facts and the verdicts into table rows
(the Parquet schema of `groupshift fleet report`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tools.check.facts import GroupFacts, scan_entries
from tools.check.rules import CLASSIC_TARGET, Settings, Verdict, downgrade_verdict, upgrade_verdict
from tools.groups.streams_classic import decode_member, is_streams_classic

# The Parquet schemas (Spark DDL); `facts_json` keeps every fact `groupshift check --json` shows.
FACTS_SCHEMA = (
    "cluster string, `group` string, type string, protocol_type string, protocol string, "
    "assignor string, generation int, size int, classic_members int, consumer_members int, "
    "static_members int, clients array<string>, assignors array<string>, topics array<string>, "
    "regexes array<string>, committed_partitions int, records int, facts_json string, "
    "kafka_streams boolean, state string, tasks int"
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
        **streams_columns(f),
    }


def streams_columns(f: GroupFacts) -> dict[str, Any]:
    """`kafka_streams`, `state` and `tasks` of a group: a KIP-1071 streams group (its state from
    its records, its members' active tasks) or a classic Kafka Streams group (the active tasks
    its leader's AssignmentInfo gave each member, decoded as `groups describe` decodes them; its
    state is not in its records). Other groups: False, their state if known, no tasks."""
    if f.type == "streams":
        return {"kafka_streams": True, "state": f.state, "tasks": sum(len(m.active_tasks) for m in f.members)}
    if not is_streams_classic(f.protocol_type, f.protocol, (m.client_id for m in f.members)):
        return {"kafka_streams": False, "state": f.state, "tasks": None}
    tasks = 0
    for m in f.members:
        member = decode_member(
            m.member_id, m.client_id, m.client_host, m.instance_id, m.streams_metadata, m.streams_assignment
        )
        tasks += member.assignment.count("active")
    return {"kafka_streams": True, "state": f.state or ("Empty" if not f.members else None), "tasks": tasks}


def judge(
    cluster: str,
    entries: Iterable[tuple[bytes, bytes | None]],
    records: Mapping[str, int],
    configs: Mapping[str, str | None],
    downgrade_targets: Sequence[str],
    topic_names: Mapping[uuid.UUID, str] | None = None,
    partition: int | None = None,
) -> list[dict[str, Any]]:
    """Rows (facts, `live`, their verdicts, the problems met) of the groups of one
    `__consumer_offsets` partition: `entries` are its live records in log order, replayed by
    `scan_entries` as `groupshift check --log-dir` replays the partition, and judged as `check`
    judges them (tools.check.command.evaluate): a coordinator release loads a partition whole,
    so a group's `kafka-X.Y` verdict weighs its partition's other groups (`peers`) and the
    records no group can be named for (`orphans`). `records` is the record count per group."""
    scan = scan_entries(entries, cluster=cluster, topic_names=topic_names, partition=partition)
    settings = settings_for(configs)
    peers = list(scan.facts.values())
    out = []
    for f in peers:
        row = facts_row(f, records.get(f.group, 0))
        row["live"] = f.live
        verdicts = [upgrade_verdict(f, settings)] if f.live else []
        for t in downgrade_targets:
            if t != CLASSIC_TARGET:
                verdicts.append(downgrade_verdict(f, t, settings, peers=peers, orphans=scan.unknown_kinds))
            elif f.live:
                verdicts.append(downgrade_verdict(f, t, settings))
        row["verdicts"] = [verdict_row(v) for v in verdicts]
        row["problems"] = scan.problems
        out.append(row)
    return out


DEFAULT_DOWNGRADE_TARGETS: tuple[str, ...] = (CLASSIC_TARGET,)

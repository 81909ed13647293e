"""What each Apache Kafka coordinator release does with each `__consumer_offsets` record kind when
it loads a partition: reads it, skips it, or fails the load.

These rules decide `groupshift check downgrade --to kafka-X.Y`. They come from the real loaders'
behaviour, each row pinned by a proof test that starts that Kafka release on a log containing the
record (e2e/test_downgrade_rules.py; docs/downgrade-rules.md lists the rows with their tests).
Rows not yet proven are marked `proven=False` and `check` reports them as such.

Three loaders exist (the record type is the key's leading int16, the value version the value's):

* the Scala `GroupMetadataManager` before KIP-915 (Kafka <= 3.4.0): `readMessageKey` knows key
  versions 0-2 only and throws `IllegalStateException` on any other, value versions above 3
  throw too. A throw during `loadGroupsAndOffsets` is logged ("Error loading offsets from
  __consumer_offsets-N") and the partition is then marked owned with nothing loaded: every group
  and offset of the partition is silently gone (OffsetFetch answers "no offset", ListGroups omits
  the groups). Note that Kafka 4.1+ writes OffsetCommitValue v4 for every offset commit without
  an expire timestamp, so a 4.1+ log fails on this loader even without consumer groups;
* the same `GroupMetadataManager` after KIP-915 (3.4.1 and 3.5+, the default coordinator through
  3.9): unknown key versions are skipped ("Unknown message key with version N ... Ignoring it"),
  value versions up to 4 are read (v4 is flexible: unknown tagged fields are ignored), versions
  above 4 fail the load as above. Consumer-group records (types 3-8, 16) are unknown to it: the
  groups' offsets load, the group appears as an Empty classic group without members;
* the new `CoordinatorRuntime` loader (4.x): record types it does not know are skipped ("Unknown
  record type N ... Ignoring it"); a known type whose value version is above what the release
  knows fails the deserialization, the partition goes to FAILED ("Failed to load metadata from
  __consumer_offsets-N") and its groups answer NOT_COORDINATOR. Kafka 3.9 runs it too when
  KIP-848 is on (`kafka-3.9-kip848`), with two differences: higher value versions are read, and
  a consumer-group record other than the group's metadata or a member's (or a group tombstone)
  fails the load when the group does not exist yet (`needs_group`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Outcome = Literal["read", "skipped", "fatal"]

#: `record_type` of the rows that cover every record type without rows of its own.
OTHER = -1

#: Record types by name (Kafka `CoordinatorRecordType`).
RECORD_TYPE_NAMES: dict[int, str] = {
    0: "OffsetCommit (key v0)",
    1: "OffsetCommit",
    2: "GroupMetadata",
    3: "ConsumerGroupMetadata",
    4: "ConsumerGroupPartitionMetadata",
    5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment",
    9: "ShareGroupPartitionMetadata",
    10: "ShareGroupMemberMetadata",
    11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata",
    13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment",
    15: "ShareGroupStatePartitionMetadata",
    16: "ConsumerGroupRegularExpression",
    17: "StreamsGroupMetadata",
    18: "StreamsGroupPartitionMetadata",
    19: "StreamsGroupMemberMetadata",
    20: "StreamsGroupTargetAssignmentMetadata",
    21: "StreamsGroupTargetAssignmentMember",
    22: "StreamsGroupCurrentMemberAssignment",
    23: "StreamsGroupTopology",
}

CONSUMER_GROUP_TYPES: tuple[int, ...] = (3, 4, 5, 6, 7, 8, 16)


@dataclass(frozen=True)
class Rule:
    target: str  # "kafka-3.7", "kafka-3.9", "kafka-4.0", ...
    record_type: int  # the coordinator record type (the key's version field); OTHER: any other
    outcome: Outcome
    proven: bool  # True once a proof test pins the row
    note: str = ""
    # value versions the row covers, inclusive; None: every version and tombstones
    versions: tuple[int, int] | None = None
    pinned_by: str = ""  # the proof test (pytest node id) when proven
    # read only if the group exists at that point of the partition (an earlier record of the
    # group created it); otherwise the load fails ("Consumer group X not found")
    needs_group: bool = False


#: `versions` of a row that covers tombstones (null values) only.
TOMBSTONE = (-1, -1)


#: The Kafka release each target was proven on (`harness.kafka_dist` specs).
TARGET_RELEASES: dict[str, str] = {
    "kafka-3.4.0": "3.4.0",
    "kafka-3.7": "3.7",
    "kafka-3.9": "3.9",
    "kafka-3.9-kip848": "3.9",
    "kafka-4.0": "4.0.2",
    "kafka-4.4": "4",
}

#: Broker settings a target needs besides the defaults.
TARGET_CONFIGS: dict[str, dict[str, str]] = {
    "kafka-3.9-kip848": {"group.coordinator.rebalance.protocols": "classic,consumer"},
}

#: Which loader each target runs ("scala-pre-kip915", "scala", "runtime").
TARGET_LOADERS: dict[str, str] = {
    "kafka-3.4.0": "scala-pre-kip915",
    "kafka-3.7": "scala",
    "kafka-3.9": "scala",
    "kafka-3.9-kip848": "runtime",
    "kafka-4.0": "runtime",
    "kafka-4.4": "runtime",
}

KAFKA_TARGETS: tuple[str, ...] = (
    "kafka-3.4.0",
    "kafka-3.7",
    "kafka-3.9",
    "kafka-3.9-kip848",
    "kafka-4.0",
    "kafka-4.4",
)

_TEST = "e2e/test_downgrade_rules.py::test_loader_rules"
_MAX = 32767


def _pinned(target: str) -> str:
    return f"{_TEST}[{target}]"


def _old_pre_kip915(target: str) -> list[Rule]:
    t, pin = target, _pinned(target)
    fatal_key = "IllegalStateException: Unknown group metadata message version: N; partition served empty"
    rows = [
        Rule(t, 0, "read", True, "offsets load (value v0 proven)", (0, 3), pin),
        Rule(t, 1, "read", True, "offsets load (values v1, v3 proven)", (0, 3), pin),
        Rule(
            t, 1, "fatal", True,
            "v4 (what Kafka 4.1+ writes): Unknown offset message version; partition served empty",
            (4, _MAX), pin,
        ),
        Rule(t, 0, "fatal", False, "as type 1", (4, _MAX)),
        Rule(t, 2, "read", True, "classic group loads (v3 proven)", (0, 3), pin),
        Rule(t, 2, "fatal", True, "v4: Unknown group metadata message version; partition served empty",
             (4, _MAX), pin),
    ]  # fmt: skip
    fatal_cg = fatal_key + " (tombstones too)"
    rows += [Rule(t, rt, "fatal", True, fatal_cg, None, pin) for rt in CONSUMER_GROUP_TYPES]
    rows.append(Rule(t, OTHER, "fatal", True, fatal_key + " (type 99 proven)", None, pin))
    return rows


def _old_kip915(target: str) -> list[Rule]:
    t, pin = target, _pinned(target)
    fatal_value = "Unknown {} message version: N (IllegalStateException); partition served empty"
    skipped = "Unknown message key with version N ... Ignoring it (WARN); the group's offsets still load"
    rows = [
        Rule(t, 0, "read", True, "offsets load (value v0 proven)", (0, 4), pin),
        Rule(t, 1, "read", True, "offsets load (v1, v3, v4 with tagged topicId proven)", (0, 4), pin),
        Rule(t, 1, "fatal", True, fatal_value.format("offset"), (5, _MAX), pin),
        Rule(t, 0, "fatal", False, fatal_value.format("offset"), (5, _MAX)),
        Rule(t, 2, "read", True, "classic group loads (v3, v4 proven)", (0, 4), pin),
        Rule(t, 2, "fatal", False, fatal_value.format("group metadata"), (5, _MAX)),
    ]
    skipped_cg = skipped + " (tombstones too)"
    rows += [Rule(t, rt, "skipped", True, skipped_cg, None, pin) for rt in CONSUMER_GROUP_TYPES]
    rows.append(Rule(t, OTHER, "skipped", True, skipped + " (type 99 proven)", None, pin))
    return rows


def _new_runtime(target: str, share: tuple[int, ...], streams: tuple[int, ...]) -> list[Rule]:
    t, pin = target, _pinned(target)
    fatal = "Found an unknown record version; partition FAILED, its groups answer NOT_COORDINATOR"
    rows = [
        Rule(t, 0, "read", True, "offsets load (value v0 proven)", (0, 4), pin),
        Rule(t, 1, "read", True, "offsets load (v1, v3, v4 with tagged topicId proven)", (0, 4), pin),
        Rule(t, 1, "fatal", True, fatal, (5, _MAX), pin),
        Rule(t, 0, "fatal", False, fatal, (5, _MAX)),
        Rule(t, 2, "read", True, "classic group loads (v3, v4 proven)", (0, 4), pin),
        Rule(t, 2, "fatal", False, fatal, (5, _MAX)),
    ]
    for rt in CONSUMER_GROUP_TYPES:
        rows.append(Rule(t, rt, "read", True, "consumer group loads (alone, all together)", (0, 0), pin))
        rows.append(Rule(t, rt, "fatal", False, fatal, (1, _MAX)))
    for rt in share + streams:
        rows.append(Rule(t, rt, "read", False, "a type this release knows (from its sources)"))
    skipped = "Unknown record type N ... Ignoring it (WARN; type 99 proven)"
    rows.append(Rule(t, OTHER, "skipped", True, skipped, None, pin))
    return rows


def _runtime_39(target: str) -> list[Rule]:
    """Kafka 3.9 with the new group coordinator on (`group.coordinator.rebalance.protocols`
    includes `consumer`, KIP-848 early access): its replay of a consumer-group record other than
    the group's metadata or a member's requires the group to exist already ("Consumer group X
    not found" fails the load), so does a tombstone; 4.x creates the group instead. After
    compaction a group's surviving records can come in any order."""
    t, pin = target, _pinned(target)
    fatal = "FAILED: Consumer group X not found (IllegalStateException); groups answer NOT_COORDINATOR"
    rows = [
        Rule(t, 0, "read", True, "offsets load (value v0 proven)", (0, 4), pin),
        Rule(t, 1, "read", True, "offsets load (v1, v3, v4 with tagged topicId proven)", (0, 4), pin),
        Rule(
            t,
            1,
            "read",
            True,
            "versions above 4 load too (v5 proven)",
            (5, _MAX),
            pin,
        ),
        Rule(t, 0, "read", False, "as type 1", (5, _MAX)),
        Rule(t, 2, "read", True, "classic group loads (v3, v4 proven)", (0, 4), pin),
        Rule(t, 2, "read", False, "as type 1", (5, _MAX)),
        Rule(t, 3, "fatal", True, "a tombstone of a group it does not hold: " + fatal, TOMBSTONE, pin),
        Rule(t, 3, "read", True, "creates the consumer group", (0, 0), pin),
        Rule(t, 5, "read", True, "creates the consumer group", (0, 0), pin),
    ]
    for rt in (4, 6, 7, 8):
        rows.append(
            Rule(t, rt, "read", True, "read if the group exists, else " + fatal, None, pin, needs_group=True)
        )
    rows.append(Rule(t, 16, "skipped", True, "Unknown record type 16 ... Ignoring it (WARN)", None, pin))
    rows += [
        Rule(t, rt, "read", False, "a share-group type 3.9 knows (from its sources)") for rt in (9, 10, 11)
    ]
    skipped = "Unknown record type N ... Ignoring it (WARN; type 99 proven)"
    rows.append(Rule(t, OTHER, "skipped", True, skipped, None, pin))
    return rows


RULES: tuple[Rule, ...] = (
    *_old_pre_kip915("kafka-3.4.0"),
    *_old_kip915("kafka-3.7"),
    *_old_kip915("kafka-3.9"),
    *_runtime_39("kafka-3.9-kip848"),
    *_new_runtime("kafka-4.0", share=(9, 10, 11, 12, 13, 14, 15), streams=()),
    *_new_runtime("kafka-4.4", share=(10, 11, 12, 13, 14, 15), streams=(17, 19, 20, 21, 22, 23)),
)


def _covers(rule: Rule, value_version: int | None) -> bool:
    if rule.versions == TOMBSTONE:
        return value_version is None
    if rule.versions is None or value_version is None:
        return True
    lo, hi = rule.versions
    return lo <= value_version <= hi


def outcome(target: str, record_type: int, value_version: int | None = None) -> Rule:
    """The rule for `record_type` (and value version, where a release treats versions differently;
    None for a tombstone or when unknown: the row of the lowest versions) when `target` loads it.
    A record type without rows of its own gets the target's OTHER row. Raises KeyError for an
    unknown target."""
    if target not in KAFKA_TARGETS:
        raise KeyError(f"unknown downgrade target {target!r}; known: {', '.join(KAFKA_TARGETS)}")
    for wanted in (record_type, OTHER):
        for rule in RULES:
            if rule.target == target and rule.record_type == wanted and _covers(rule, value_version):
                return rule
    raise KeyError(f"no rule for record type {record_type} on {target}")


def rules_for(target: str) -> list[Rule]:
    """Every row of `target`, in table order."""
    return [r for r in RULES if r.target == target]

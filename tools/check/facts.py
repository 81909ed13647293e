"""What `groupshift check` knows about a group: plain, picklable facts, built from one of three
inputs, so that one set of rules (tools.check.rules) judges them all.

- `facts_from_records`: a replay of `__consumer_offsets` records (groupshift's data dir, a Kafka
  broker's partition directories, or any iterable of decoded records), compacted as Kafka's
  loader sees them: the last value of each key wins, a tombstone deletes it. This is the state
  Kafka's `GroupMetadataManager` rebuilds on load (`replay` of GroupMetadata, ConsumerGroup*
  and OffsetCommit records).
- `facts_from_entries`: the same from raw (key bytes, value bytes) pairs, which also keeps each
  record's value version (what the Kafka loader rules of a downgrade depend on).
- `facts_from_admin`: a live endpoint over the wire with admin APIs only (ListGroups,
  DescribeGroups, ConsumerGroupDescribe, OffsetFetch, DescribeConfigs, Metadata, ApiVersions),
  against groupshift or any Kafka 2.x+ broker, through tools.groups.wire.

The facts are what the conversion code reads: for a classic group, Kafka's `validateOnlineUpgrade`
(policy, protocol type `consumer`, size) and `ConsumerGroup.fromClassicGroup` (every member's
embedded subscription and assignment parse; assignment userData means a client-side assignor,
KAFKA-18134); for a consumer group, `validateOnlineDowngrade*` (policy, size vs group.max.size,
every member classic) and `ClassicGroup.fromConsumerGroup` (the classic members' protocols).

Everything here is pure data: the fleet scanner pickles `GroupFacts` across Spark workers and
calls the same builders and rules.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from records.classic_group import GroupMetadataKey, GroupMetadataValue
from records.consumer_group import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    TopicPartitions,
)
from records.coordinator import CoordinatorRecord
from records.offsets import OffsetCommitKey, OffsetCommitValue
from records.streams_group import (
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataKey,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMetadataValue,
)
from tools.groups.streams_classic import is_streams_classic
from translation.embedded_protocol import SchemaError, parse_assignment, parse_subscription

GroupType = Literal["classic", "consumer", "empty", "streams"]
Rebalance = Literal["eager", "cooperative", "unknown"]

# Client-side assignors by the rebalance protocol they run (Java `ConsumerPartitionAssignor.
# supportedProtocols()`, librdkafka's `rd_kafka_assignor_t.rkas_protocol`). Java's `sticky` is
# eager; `cooperative-sticky` also supports eager but a member lists it to rebalance cooperatively.
EAGER_ASSIGNORS = frozenset({"range", "roundrobin", "sticky"})
COOPERATIVE_ASSIGNORS = frozenset({"cooperative-sticky"})
BUILTIN_ASSIGNORS = EAGER_ASSIGNORS | COOPERATIVE_ASSIGNORS

_I16 = struct.Struct(">h")


def rebalance_of(assignors: Iterable[str]) -> Rebalance:
    """The rebalance protocol a member runs with these assignors (its preference order): Java's
    ConsumerCoordinator uses the highest protocol *every* configured assignor supports, so one
    eager assignor makes the member eager; librdkafka refuses to mix them."""
    names = [a for a in assignors]
    if not names:
        return "unknown"
    if any(a in EAGER_ASSIGNORS for a in names):
        return "eager"
    if all(a in COOPERATIVE_ASSIGNORS for a in names):
        return "cooperative"
    return "unknown"


def client_software(client_id: str) -> str | None:
    """The client library a default client id names (an explicit client.id names none)."""
    cid = client_id.lower()
    if cid.startswith("rdkafka") or cid.startswith("confluent"):
        return "librdkafka"
    if cid.startswith("kafka-python"):
        return "kafka-python"
    if cid.startswith("aiokafka"):
        return "aiokafka"
    if cid.startswith("consumer-"):
        return "java"
    if cid.startswith("connector-consumer-") or cid.endswith("-streamthread"):
        return "java"
    return None


@dataclass(frozen=True, slots=True)
class MemberFacts:
    member_id: str
    client_id: str
    client_host: str = ""
    instance_id: str | None = None
    protocol: Literal["classic", "consumer", "streams"] = "classic"  # the protocol the member speaks
    # Classic assignor names the member offers, in preference order. A classic group's records
    # and DescribeGroups keep only the selected protocol (`assignors_complete` False then).
    assignors: tuple[str, ...] = ()
    assignors_complete: bool = False
    server_assignor: str | None = None  # a consumer-protocol member's group.remote.assignor
    subscribed_topics: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    subscription_version: int | None = None
    embedded_error: str | None = None  # the embedded subscription/assignment does not parse
    assignment_user_data: bool = False  # the classic assignment carries userData
    subscription_user_data: bool = False
    owned: tuple[tuple[str, int], ...] = ()  # (topic name or id, partition)
    member_epoch: int | None = None
    session_timeout_ms: int | None = None
    rebalance_timeout_ms: int | None = None
    # A Kafka Streams member (protocol `stream`, or a StreamThread consumer): its raw JoinGroup
    # metadata and SyncGroup assignment, decoded by the streams-conversion rule.
    streams_metadata: bytes | None = None
    streams_assignment: bytes | None = None
    # A classic Kafka Connect worker (protocol type `connect`): its raw JoinGroup metadata and
    # SyncGroup assignment, decoded by the connect-conversion rules.
    connect_metadata: bytes | None = None
    connect_assignment: bytes | None = None
    # A streams-group (KIP-1071) member's active tasks: (subtopology id, partition).
    active_tasks: tuple[tuple[str, int], ...] = ()

    @property
    def rebalance(self) -> Rebalance:
        return rebalance_of(self.assignors)

    @property
    def software(self) -> str | None:
        return client_software(self.client_id)


@dataclass(frozen=True, slots=True)
class RecordKind:
    """How many live (post-compaction) records of one kind the group has in the log;
    `value_version` None for tombstones kept by a log that is not compacted yet."""

    record_type: int
    value_version: int | None
    count: int


@dataclass(frozen=True, slots=True)
class GroupFacts:
    """One group. `type`: "classic" (a classic group with members), "consumer" (a KIP-848
    consumer group, with or without members), "empty" (a classic group without members, or only
    committed offsets: converts either way whatever the policy), "streams" (a KIP-1071 streams
    group, with or without members; `generation` is its group epoch)."""

    group: str
    cluster: str = ""
    source: str = ""  # "records", "log-entries", "admin"
    type: GroupType = "empty"
    state: str | None = None
    protocol_type: str | None = None
    protocol: str | None = None  # the classic group's selected protocol (client assignor)
    assignor: str | None = None  # a consumer group's server assignor, when the input says
    generation: int | None = None  # classic generation or consumer group epoch
    members: tuple[MemberFacts, ...] = ()
    regexes: tuple[str, ...] = ()
    offsets: tuple[tuple[str, int, int], ...] = ()  # (topic, partition, committed offset)
    record_kinds: tuple[RecordKind, ...] = ()
    record_kinds_exact: bool = False  # True when read from the log's bytes (value versions seen)
    notes: tuple[str, ...] = ()
    # Every record of the group a loader reads from its log, superseded values and tombstones
    # included (until compaction removes them); tombstones have value_version None.
    log_record_kinds: tuple[RecordKind, ...] = ()
    partition: int | None = None  # its __consumer_offsets partition, when known
    live: bool = True  # False: nothing of the group is left but old records in the log

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def static_members(self) -> tuple[MemberFacts, ...]:
        return tuple(m for m in self.members if m.instance_id)

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        out = asdict(self)
        out["size"] = self.size
        return out


# --- from records ------------------------------------------------------------------------------


def _member_from_classic(protocol_type: str, protocol: str | None, m: Any) -> MemberFacts:
    embedded_error = None
    sub_version = None
    topics: tuple[str, ...] = ()
    owned: tuple[tuple[str, int], ...] = ()
    a_user = s_user = False
    if protocol_type == "consumer":
        try:
            if m.assignment:
                a = parse_assignment(m.assignment)
                owned = tuple(sorted((t, p) for t, ps in a.partitions for p in ps))
                a_user = bool(a.user_data)
            s = parse_subscription(m.subscription)
            sub_version, topics, s_user = s.version, tuple(sorted(s.topics)), bool(s.user_data)
        except (SchemaError, ValueError) as e:
            embedded_error = str(e) or type(e).__name__
    out = MemberFacts(
        member_id=m.member_id,
        client_id=m.client_id,
        client_host=m.client_host,
        instance_id=m.group_instance_id,
        protocol="classic",
        assignors=(protocol,) if protocol else (),
        assignors_complete=False,
        subscribed_topics=topics,
        subscription_version=sub_version,
        embedded_error=embedded_error,
        assignment_user_data=a_user,
        subscription_user_data=s_user,
        owned=owned,
        session_timeout_ms=m.session_timeout,
        rebalance_timeout_ms=m.rebalance_timeout,
    )
    if protocol_type == "connect":  # a GroupMetadata record: Connect's classic workers
        out = replace(
            out, connect_metadata=bytes(m.subscription or b""), connect_assignment=bytes(m.assignment or b"")
        )
    streams = _streams_bytes(protocol_type, protocol, m.client_id, m.subscription, m.assignment)
    return replace(out, streams_metadata=streams[0], streams_assignment=streams[1]) if streams else out


def _streams_bytes(
    protocol_type: str | None,
    protocol: str | None,
    client_id: str,
    metadata: bytes | None,
    assignment: bytes | None,
) -> tuple[bytes | None, bytes | None] | None:
    """The raw member bytes a Kafka Streams member's facts keep (None for other members)."""
    if not is_streams_classic(protocol_type, protocol, (client_id,)):
        return None
    return (bytes(metadata) if metadata else None, bytes(assignment) if assignment else None)


def _tp_names(tps: Iterable[TopicPartitions], names: Mapping[uuid.UUID, str]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((names.get(t.topic_id, str(t.topic_id)), p) for t in tps for p in t.partitions))


def _value_version(value: object) -> int | None:
    if isinstance(value, OffsetCommitValue):
        return 1 if value.expire_timestamp != -1 else 3
    v = getattr(value, "VERSION", None)
    return v if isinstance(v, int) else None


def facts_from_records(
    records: Iterable[CoordinatorRecord],
    *,
    cluster: str = "",
    topic_names: Mapping[uuid.UUID, str] | None = None,
    value_versions: Mapping[object, int] | None = None,
) -> dict[str, GroupFacts]:
    """Replay `records` in log order, compacted (last value per key, tombstones delete), and
    return the facts of every group that has any state left. `topic_names` maps the topic ids of
    consumer-group assignments to names (the log's own ConsumerGroupPartitionMetadata records are
    used too); `value_versions` gives the value version seen in the log per key (else the
    version our codec writes is assumed and `record_kinds_exact` is False)."""
    live: dict[object, object] = {}
    for r in records:
        if r.value is None:
            live.pop(r.key, None)
        else:
            live.pop(r.key, None)  # re-insert: dict order = order of the last write
            live[r.key] = r.value
    return _facts_from_live(live, cluster, dict(topic_names or {}), value_versions, "records")


@dataclass
class LogScan:
    """What one `__consumer_offsets` partition's records say: the facts of every group with
    records in it (`live` False for a group that only has old records left), the problems met,
    and the records of types we cannot decode (another release's: share or streams groups),
    which no group can be named for but which a loader reads all the same."""

    facts: dict[str, GroupFacts]
    problems: list[str]
    unknown_kinds: tuple[RecordKind, ...]


def scan_entries(
    entries: Iterable[tuple[bytes, bytes | None]],
    *,
    cluster: str = "",
    topic_names: Mapping[uuid.UUID, str] | None = None,
    partition: int | None = None,
) -> LogScan:
    """Replay raw (key, value) bytes of one partition's log in order (see `facts_from_entries`)."""
    from records.codec import RecordDecodeError, UnknownRecordTypeError, decode_record

    live: dict[object, object] = {}
    versions: dict[object, int] = {}
    problems: list[str] = []
    unknown: dict[tuple[int, int | None], int] = {}
    seen: dict[str, dict[tuple[int, int | None], int]] = {}
    for i, (k, v) in enumerate(entries):
        version = _I16.unpack_from(v, 0)[0] if v is not None and len(v) >= 2 else None
        try:
            rec = decode_record(k, v)
        except UnknownRecordTypeError as e:
            unknown[(e.record_type, version)] = unknown.get((e.record_type, version), 0) + 1
            continue
        except RecordDecodeError as e:
            problems.append(f"record {i}: {e}")
            continue
        group = getattr(rec.key, "group", None) or getattr(rec.key, "group_id", None)
        if isinstance(group, str):
            per = seen.setdefault(group, {})
            kind = (int(getattr(rec.key, "RECORD_TYPE", -1)), version)
            per[kind] = per.get(kind, 0) + 1
        live.pop(rec.key, None)
        versions.pop(rec.key, None)
        if rec.value is not None:
            live[rec.key] = rec.value
            if version is not None:
                versions[rec.key] = version
    for (t, ver), n in sorted(unknown.items(), key=lambda kv: (kv[0][0], kv[0][1] or -1)):
        problems.append(f"{n} record(s) of unknown type {t} (value v{ver})")
    facts = _facts_from_live(live, cluster, dict(topic_names or {}), versions, "log-entries")
    out: dict[str, GroupFacts] = {}
    for group in sorted(set(facts) | set(seen)):
        f = facts.get(group) or GroupFacts(group=group, cluster=cluster, source="log-entries", live=False)
        kinds = tuple(
            RecordKind(t, ver, n)
            for (t, ver), n in sorted(seen.get(group, {}).items(), key=lambda kv: (kv[0][0], kv[0][1] or -1))
        )
        out[group] = replace(f, log_record_kinds=kinds, partition=partition, record_kinds_exact=True)
    unknown_kinds = tuple(
        RecordKind(t, ver, n)
        for (t, ver), n in sorted(unknown.items(), key=lambda kv: (kv[0][0], kv[0][1] or -1))
    )
    return LogScan(out, problems, unknown_kinds)


def facts_from_entries(
    entries: Iterable[tuple[bytes, bytes | None]],
    *,
    cluster: str = "",
    topic_names: Mapping[uuid.UUID, str] | None = None,
) -> tuple[dict[str, GroupFacts], list[str]]:
    """Like `facts_from_records` from raw (key, value) bytes in log order, keeping each live
    record's value version and every record kind the log holds for the group. Returns the facts
    and the problems met (a record that does not decode, an unknown record type), which Kafka's
    loader would also meet."""
    scan = scan_entries(entries, cluster=cluster, topic_names=topic_names)
    return scan.facts, scan.problems


def _facts_from_live(
    live: Mapping[object, object],
    cluster: str,
    names: dict[uuid.UUID, str],
    versions: Mapping[object, int] | None,
    source: str,
) -> dict[str, GroupFacts]:
    classic: dict[str, GroupMetadataValue] = {}
    epochs: dict[str, int] = {}
    cmembers: dict[str, dict[str, ConsumerGroupMemberMetadataValue]] = {}
    current: dict[tuple[str, str], ConsumerGroupCurrentMemberAssignmentValue] = {}
    regexes: dict[str, list[str]] = {}
    offsets: dict[str, list[tuple[str, int, int]]] = {}
    kinds: dict[str, dict[tuple[int, int | None], int]] = {}
    streams_epochs: dict[str, int] = {}
    smembers: dict[str, dict[str, StreamsGroupMemberMetadataValue]] = {}
    scurrent: dict[tuple[str, str], StreamsGroupCurrentMemberAssignmentValue] = {}
    stargets: dict[str, int] = {}
    for key, value in live.items():
        group = getattr(key, "group", None) or getattr(key, "group_id", None)
        if not isinstance(group, str):
            continue
        rtype = int(getattr(key, "RECORD_TYPE", -1))
        version = versions.get(key) if versions is not None and key in versions else _value_version(value)
        per = kinds.setdefault(group, {})
        per[(rtype, version)] = per.get((rtype, version), 0) + 1
        if isinstance(key, GroupMetadataKey) and isinstance(value, GroupMetadataValue):
            classic[group] = value
        elif isinstance(key, ConsumerGroupMetadataKey) and isinstance(value, ConsumerGroupMetadataValue):
            epochs[group] = value.epoch
        elif isinstance(key, ConsumerGroupMemberMetadataKey) and isinstance(
            value, ConsumerGroupMemberMetadataValue
        ):
            cmembers.setdefault(group, {})[key.member_id] = value
        elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey) and isinstance(
            value, ConsumerGroupCurrentMemberAssignmentValue
        ):
            current[(group, key.member_id)] = value
        elif isinstance(key, ConsumerGroupRegularExpressionKey):
            regexes.setdefault(group, []).append(key.regular_expression)
        elif isinstance(value, ConsumerGroupPartitionMetadataValue):
            for t in value.topics:
                names.setdefault(t.topic_id, t.topic_name)
        elif isinstance(key, OffsetCommitKey) and isinstance(value, OffsetCommitValue):
            offsets.setdefault(group, []).append((key.topic, key.partition, value.offset))
        elif isinstance(key, StreamsGroupMetadataKey) and isinstance(value, StreamsGroupMetadataValue):
            streams_epochs[group] = value.epoch
        elif isinstance(key, StreamsGroupTargetAssignmentMetadataKey) and isinstance(
            value, StreamsGroupTargetAssignmentMetadataValue
        ):
            stargets[group] = value.assignment_epoch
        elif isinstance(key, StreamsGroupMemberMetadataKey) and isinstance(
            value, StreamsGroupMemberMetadataValue
        ):
            smembers.setdefault(group, {})[key.member_id] = value
        elif isinstance(key, StreamsGroupCurrentMemberAssignmentKey) and isinstance(
            value, StreamsGroupCurrentMemberAssignmentValue
        ):
            scurrent[(group, key.member_id)] = value
        elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
            pass
    out: dict[str, GroupFacts] = {}
    for group in sorted(kinds):
        base = GroupFacts(
            group=group,
            cluster=cluster,
            source=source,
            offsets=tuple(sorted(offsets.get(group, []))),
            record_kinds=tuple(
                RecordKind(t, v, n)
                for (t, v), n in sorted(kinds[group].items(), key=lambda kv: (kv[0][0], kv[0][1] or -1))
            ),
            record_kinds_exact=versions is not None,
        )
        if group in epochs or group in cmembers:
            members = []
            for mid, mv in sorted(cmembers.get(group, {}).items()):
                cur = current.get((group, mid))
                cm = mv.classic_member_metadata
                members.append(
                    MemberFacts(
                        member_id=mid,
                        client_id=mv.client_id,
                        client_host=mv.client_host,
                        instance_id=mv.instance_id,
                        protocol="classic" if cm is not None else "consumer",
                        assignors=tuple(p.name for p in cm.supported_protocols) if cm else (),
                        assignors_complete=cm is not None,
                        server_assignor=mv.server_assignor,
                        subscribed_topics=tuple(sorted(mv.subscribed_topic_names)),
                        subscribed_regex=mv.subscribed_topic_regex or None,
                        owned=_tp_names(cur.assigned_partitions, names) if cur else (),
                        member_epoch=cur.member_epoch if cur else None,
                        session_timeout_ms=cm.session_timeout_ms if cm else None,
                        rebalance_timeout_ms=mv.rebalance_timeout_ms,
                    )
                )
            member_regexes = {m.subscribed_regex for m in members if m.subscribed_regex}
            out[group] = replace(
                base,
                type="consumer",
                protocol_type="consumer",
                state=None,
                generation=epochs.get(group),
                members=tuple(members),
                regexes=tuple(sorted(set(regexes.get(group, [])) | member_regexes)),
            )
        elif group in streams_epochs or group in smembers:
            streams_members = []
            for mid, sv in sorted(smembers.get(group, {}).items()):
                scur = scurrent.get((group, mid))
                streams_members.append(
                    MemberFacts(
                        member_id=mid,
                        client_id=sv.client_id,
                        client_host=sv.client_host,
                        instance_id=sv.instance_id,
                        protocol="streams",
                        member_epoch=scur.member_epoch if scur else None,
                        rebalance_timeout_ms=sv.rebalance_timeout_ms,
                        active_tasks=tuple(
                            sorted((t.subtopology_id, p) for t in scur.active_tasks for p in t.partitions)
                        )
                        if scur
                        else (),
                    )
                )
            out[group] = replace(
                base,
                type="streams",
                protocol_type="streams",
                state=_streams_state(streams_epochs.get(group), stargets.get(group), streams_members),
                generation=streams_epochs.get(group),
                members=tuple(streams_members),
            )
        elif group in classic:
            g = classic[group]
            members = [_member_from_classic(g.protocol_type, g.protocol, m) for m in g.members]
            out[group] = replace(
                base,
                type="classic" if members else "empty",
                state=None,
                protocol_type=g.protocol_type,
                protocol=g.protocol,
                generation=g.generation,
                members=tuple(sorted(members, key=lambda m: m.member_id)),
            )
        else:
            out[group] = base  # offsets only
    return out


def _streams_state(epoch: int | None, target_epoch: int | None, members: list[MemberFacts]) -> str:
    """A streams group's state from its records, as Kafka's StreamsGroup derives it where the
    records tell: Empty without members, Assigning while the target assignment is behind the
    group epoch, Reconciling while a member is not at the target's epoch, else Stable. NotReady
    (a topology not validated against the topics) needs the topics and is not told apart."""
    if not members:
        return "Empty"
    if epoch is not None and (target_epoch is None or target_epoch < epoch):
        return "Assigning"
    if any(m.member_epoch != target_epoch for m in members):
        return "Reconciling"
    return "Stable"


# --- from a live endpoint ----------------------------------------------------------------------


@dataclass
class AdminRead:
    """What `facts_from_admin` read besides the groups: the broker settings that decide
    conversions (None where the broker does not list them) and the topic names."""

    settings: dict[str, str | None] = field(default_factory=dict)
    topics: tuple[str, ...] = ()
    api_versions: dict[int, tuple[int, int]] = field(default_factory=dict)


SETTING_NAMES = (
    "group.consumer.migration.policy",
    "group.consumer.max.size",
    "group.max.size",
    "group.consumer.assignors",
)


def facts_from_admin(
    admin: Any, groups: Iterable[str] | None = None, *, cluster: str = ""
) -> tuple[dict[str, GroupFacts], AdminRead]:
    """Read `groups` (None: every group ListGroups lists) from a live endpoint; `admin` is a
    tools.groups.wire.AdminWire. Only admin APIs are used; nothing is written."""
    from tools.groups.snapshot import describe
    from tools.groups.streams_group import describe_streams
    from tools.groups.wire import BROKER_RESOURCE, KafkaError, WireError

    read = AdminRead()
    try:
        node = admin.node_ids()[0]
        found = admin.describe_configs(BROKER_RESOURCE, str(node))
    except (KafkaError, WireError, IndexError):
        found = {}
    read.settings = {n: (found[n]["value"] if n in found else None) for n in SETTING_NAMES}
    try:
        read.topics = tuple(sorted(t for t in admin.metadata(None) if not t.startswith("__")))
    except (KafkaError, WireError):
        read.topics = ()
    read.api_versions = dict(admin._any_conn().versions)
    offsets_partitions: int | None = None
    try:
        offsets_partitions = len(admin.metadata(["__consumer_offsets"]).get("__consumer_offsets", {})) or None
    except (KafkaError, WireError):
        offsets_partitions = None
    listed = {g["group"]: g for g in admin.list_groups()}
    wanted = sorted(listed) if groups is None else list(groups)
    out: dict[str, GroupFacts] = {}
    for gid in wanted:
        try:
            committed = admin.offset_fetch(gid)
        except KafkaError:
            committed = {}
        offsets = tuple(sorted((t, p, o) for (t, p), (o, _e, _m) in committed.items()))
        streams_group = describe_streams(admin, gid)
        if streams_group is not None:
            out[gid] = _streams_facts(streams_group, cluster, offsets)
            continue
        g = describe(admin, gid)
        if not g.exists:
            if offsets:
                out[gid] = GroupFacts(group=gid, cluster=cluster, source="admin", offsets=offsets)
            continue
        # A classic Kafka Connect cluster's group; a connect group on the new protocol is described
        # with protocol type `connect` too, but ListGroups says its type is `Connect`.
        classic_connect = (
            g.group_type == "classic"
            and g.protocol_type == "connect"
            and str((listed.get(gid) or {}).get("type") or "").lower() != "connect"
        )
        raw_members = {}
        if g.group_type == "classic" and g.protocol_type == "consumer":
            raw_members = {m.member_id: m for m in admin.describe_group(gid).members}
        members = []
        for m in g.members:
            sub_version = None
            s_user = False
            raw = raw_members.get(m.member_id)
            if raw is not None and raw.member_metadata:
                try:
                    s = parse_subscription(raw.member_metadata)
                    sub_version, s_user = s.version, bool(s.user_data)
                except (SchemaError, ValueError):
                    pass
            classic_group = g.group_type == "classic"
            streams = (
                _streams_bytes(g.protocol_type, g.assignor, m.client_id, m.metadata, m.raw_assignment)
                if classic_group
                else None
            )
            members.append(
                MemberFacts(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    client_host=m.host,
                    instance_id=m.instance_id,
                    protocol="classic" if classic_group or m.protocol == "classic" else "consumer",
                    assignors=(g.assignor,) if classic_group and g.assignor else (),
                    assignors_complete=False,
                    subscribed_topics=tuple(sorted(m.subscribed)),
                    subscription_version=sub_version,
                    embedded_error=m.decode_error,
                    assignment_user_data=m.user_data,
                    subscription_user_data=s_user,
                    owned=tuple(m.partitions),
                    member_epoch=m.member_epoch,
                    streams_metadata=streams[0] if streams else None,
                    streams_assignment=streams[1] if streams else None,
                    connect_metadata=(m.metadata or b"") if classic_connect else None,
                    connect_assignment=(m.raw_assignment or b"") if classic_connect else None,
                )
            )
        regexes: tuple[str, ...] = ()
        if g.group_type == "consumer":
            regexes = _consumer_group_regexes(admin, gid)
        gtype: GroupType
        if g.group_type == "consumer":
            gtype = "consumer"
        else:
            gtype = "classic" if members else "empty"
        out[gid] = GroupFacts(
            group=gid,
            cluster=cluster,
            source="admin",
            type=gtype,
            state=g.state,
            protocol_type=g.protocol_type,
            protocol=g.assignor if g.group_type == "classic" else None,
            assignor=g.assignor if g.group_type == "consumer" else None,
            generation=g.group_epoch,
            members=tuple(sorted(members, key=lambda m: m.member_id)),
            regexes=regexes,
            offsets=offsets,
        )
    if offsets_partitions is not None:
        from gateway.groups.routing import partition_for

        out = {g: replace(f, partition=partition_for(g, offsets_partitions)) for g, f in out.items()}
    return out, read


def _streams_facts(group: Any, cluster: str, offsets: tuple[tuple[str, int, int], ...]) -> GroupFacts:
    """The facts of a streams group read with StreamsGroupDescribe (a
    tools.groups.streams_group.StreamsGroup)."""
    members = tuple(
        MemberFacts(
            member_id=m.member_id,
            client_id=m.client_id,
            client_host=m.host,
            instance_id=m.instance_id,
            protocol="classic" if m.is_classic else "streams",
            member_epoch=m.member_epoch,
            active_tasks=tuple(sorted((s, p) for s, ps in m.assignment.active.items() for p in ps)),
        )
        for m in sorted(group.members, key=lambda m: m.member_id)
    )
    return GroupFacts(
        group=group.group_id,
        cluster=cluster,
        source="admin",
        type="streams",
        state=group.state,
        protocol_type="streams",
        generation=group.group_epoch,
        members=members,
        offsets=offsets,
    )


def _consumer_group_regexes(admin: Any, group: str) -> tuple[str, ...]:
    """The members' subscribed regexes (ConsumerGroupDescribe `subscribed_topic_regex`)."""
    answer = admin.consumer_group_describe(group)
    if answer is None:
        return ()
    g, _v = answer
    found = {str(r) for m in g.members if (r := getattr(m, "subscribed_topic_regex", None))}
    return tuple(sorted(found))

"""Unit tests of `groupshift check`'s rules (tools.check.rules) on facts built from records
(tools.check.facts): one test per rule, each asserting the verdict, the reason and, for a
refused upgrade, Kafka 4.3's exact message."""

from __future__ import annotations

import pickle
import uuid
from dataclasses import replace

import pytest

from records.classic_group import GroupMemberMetadata, GroupMetadataKey, GroupMetadataValue
from records.codec import encode_record
from records.consumer_group import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    TopicPartitions,
)
from records.coordinator import CoordinatorRecord
from records.offsets import OffsetCommitKey, OffsetCommitValue
from tools.check.facts import GroupFacts, MemberFacts, RecordKind, facts_from_entries, facts_from_records
from tools.check.rules import (
    NEEDS_ACTION,
    NOT_READY,
    READY,
    SAFE,
    UNSAFE,
    Settings,
    downgrade_verdict,
    elect_protocol,
    inferred_record_kinds,
    regex_meaning,
    upgrade_verdict,
)
from translation.embedded_protocol import Subscription, serialize_assignment, serialize_subscription

DEFAULTS = Settings()


def classic_member(
    mid: str,
    *,
    topics: tuple[str, ...] = ("orders",),
    parts: tuple[int, ...] = (0,),
    user_data: bytes | None = None,
    instance: str | None = None,
    subscription: bytes | None = None,
    client: str = "kafka-python-3.0",
) -> GroupMemberMetadata:
    return GroupMemberMetadata(
        member_id=mid,
        group_instance_id=instance,
        client_id=client,
        client_host="/127.0.0.1",
        rebalance_timeout=30000,
        session_timeout=10000,
        subscription=serialize_subscription(Subscription(1, topics))
        if subscription is None
        else subscription,
        assignment=serialize_assignment({topics[0]: list(parts)}, 1, user_data),
    )


def classic_group(
    *members: GroupMemberMetadata, protocol_type: str = "consumer", protocol: str = "range", gid: str = "g"
) -> list[CoordinatorRecord]:
    value = GroupMetadataValue(
        protocol_type, 3, protocol, members[0].member_id if members else None, 0, members
    )
    return [
        CoordinatorRecord(OffsetCommitKey(gid, "orders", 0), OffsetCommitValue(42, -1, "", 0)),
        CoordinatorRecord(GroupMetadataKey(gid), value),
    ]


def facts(records: list[CoordinatorRecord], gid: str = "g") -> GroupFacts:
    return facts_from_records(records)[gid]


def test_a_plain_range_group_is_ready_and_keeps_range() -> None:
    v = upgrade_verdict(facts(classic_group(classic_member("a"), classic_member("b", parts=(1,)))), DEFAULTS)
    assert v.verdict == READY, v
    assert v.kafka_message is None
    # the broker default server assignor is uniform: a range group is told to ask for range
    assert any(
        c.name == "server-assignor"
        and c.fix == "set group.remote.assignor=range on the consumer-protocol members"
        for c in v.details
    )


def test_policy_refuses_with_kafkas_message() -> None:
    v = upgrade_verdict(facts(classic_group(classic_member("a"))), Settings(migration_policy="downgrade"))
    assert v.verdict == NOT_READY
    assert (
        v.kafka_message
        == "Cannot upgrade classic group g to consumer group because online upgrade is disabled."
    )
    assert "group.consumer.migration.policy=bidirectional" in (v.fix or "")


def test_non_consumer_protocol_type_is_refused() -> None:
    records = classic_group(classic_member("a", subscription=b"\x00\x01connect"), protocol_type="connect")
    v = upgrade_verdict(facts(records), DEFAULTS)
    assert v.verdict == NOT_READY
    assert v.kafka_message == (
        "Cannot upgrade classic group g to consumer group because the group does not use the consumer "
        "embedded protocol."
    )
    assert "connect" in v.reason


def test_size_over_consumer_max_size_is_refused() -> None:
    records = classic_group(classic_member("a"), classic_member("b"), classic_member("c"))
    v = upgrade_verdict(facts(records), Settings.from_configs({"group.consumer.max.size": "2"}))
    assert v.verdict == NOT_READY
    assert v.reason.startswith("3 members exceed group.consumer.max.size=2")
    assert v.kafka_message is not None and v.kafka_message.endswith(
        "the group size exceeds the consumer group maximum size."
    )


def test_malformed_embedded_protocol_is_refused() -> None:
    v = upgrade_verdict(facts(classic_group(classic_member("a", subscription=b"\x00\x00\x00"))), DEFAULTS)
    assert v.verdict == NOT_READY
    assert v.kafka_message == (
        "Cannot upgrade classic group g to consumer group because the embedded consumer protocol "
        "is malformed."
    )


def test_assignment_user_data_is_a_custom_assignor() -> None:
    m = classic_member("a", user_data=b"sticky", client="rdkafka")
    v = upgrade_verdict(facts(classic_group(m, protocol="cooperative-sticky")), DEFAULTS)
    assert v.verdict == NOT_READY
    assert "KAFKA-18134" in v.reason and "librdkafka" in v.reason
    assert v.kafka_message is not None and "an unsupported custom assignor is in use" in v.kafka_message


def test_refusals_follow_kafkas_order() -> None:
    # policy first, whatever else is wrong
    m = classic_member("a", user_data=b"x")
    v = upgrade_verdict(facts(classic_group(m)), Settings(migration_policy="disabled"))
    assert v.kafka_message is not None and v.kafka_message.endswith("online upgrade is disabled.")
    assert "(+1 more)" in v.reason


def test_static_members_and_cooperative_mix() -> None:
    gid = "cg"
    members = []
    recs: list[CoordinatorRecord] = [
        CoordinatorRecord(ConsumerGroupMetadataKey(gid), ConsumerGroupMetadataValue(5))
    ]
    for mid, protocols in (("e", ("range",)), ("c", ("cooperative-sticky",))):
        members.append(mid)
        recs.append(
            CoordinatorRecord(
                ConsumerGroupMemberMetadataKey(gid, mid),
                ConsumerGroupMemberMetadataValue(
                    f"i-{mid}",
                    None,
                    "consumer-cg-1",
                    "/h",
                    ("orders",),
                    None,
                    30000,
                    None,
                    ClassicMemberMetadata(10000, tuple(ClassicProtocol(p, b"") for p in protocols)),
                ),
            )
        )
    f = facts(recs, gid)
    assert f.type == "consumer" and f.size == 2 and len(f.static_members) == 2
    assert upgrade_verdict(f, DEFAULTS).verdict == READY
    # downgrade: no common classic protocol -> a rolled-back member is refused
    d = downgrade_verdict(f, "classic-protocol", DEFAULTS)
    assert d.verdict == UNSAFE and "no common assignor" in d.reason


def test_eager_classic_group_is_told_it_revokes_all() -> None:
    v = upgrade_verdict(facts(classic_group(classic_member("a"))), DEFAULTS)
    mix = [c for c in v.details if c.name == "assignor-mix"]
    assert mix and mix[0].status == "info" and "eager" in mix[0].reason


def test_static_classic_member_note() -> None:
    v = upgrade_verdict(facts(classic_group(classic_member("a", instance="host-1"))), DEFAULTS)
    assert v.verdict == READY
    static = [c for c in v.details if c.name == "static-members"]
    assert static and "SAME group.instance.id" in (static[0].fix or "")


def test_empty_group_converts_whatever_the_policy() -> None:
    v = upgrade_verdict(facts(classic_group()), Settings(migration_policy="disabled"))
    assert v.verdict == READY and "whatever the policy" in v.reason


@pytest.mark.parametrize(
    ("pattern", "topics", "status", "needle"),
    [
        ("orders-(?!test).*", None, "refused", "lookaround"),
        (r"(a)\1", None, "refused", "lookaround or backreference"),
        ("^orders", ("orders", "orders-eu", "xorders"), "warning", "lost: orders-eu"),
        ("orders.*", ("orders", "orders-eu"), None, None),
    ],
)
def test_regex_meaning_under_re2(
    pattern: str, topics: tuple[str, ...] | None, status: str | None, needle: str | None
) -> None:
    c = regex_meaning(pattern, topics)
    if status is None:
        assert c is None
        return
    assert c is not None and c.status == status and needle is not None and needle in c.reason


def test_operator_regex_makes_a_classic_group_not_ready() -> None:
    s = Settings(regexes=(("g", "orders-(?=eu).*"),))
    v = upgrade_verdict(facts(classic_group(classic_member("a"))), s)
    assert v.verdict == NOT_READY and "INVALID_REGULAR_EXPRESSION" in v.reason


def consumer_group(n: int, gid: str = "cg") -> list[CoordinatorRecord]:
    t = uuid.uuid4()
    recs = [CoordinatorRecord(ConsumerGroupMetadataKey(gid), ConsumerGroupMetadataValue(3))]
    for i in range(n):
        mid = f"m{i}"
        recs.append(
            CoordinatorRecord(
                ConsumerGroupMemberMetadataKey(gid, mid),
                ConsumerGroupMemberMetadataValue(None, None, "rdkafka", "/h", ("orders",), None),
            )
        )
        recs.append(
            CoordinatorRecord(
                ConsumerGroupCurrentMemberAssignmentKey(gid, mid),
                ConsumerGroupCurrentMemberAssignmentValue(3, 2, 0, (TopicPartitions(t, (i,)),)),
            )
        )
    return recs


def test_classic_protocol_downgrade_rules() -> None:
    f = facts(consumer_group(3), "cg")
    assert downgrade_verdict(f, "classic-protocol", DEFAULTS).verdict == SAFE
    small = Settings.from_configs({"group.max.size": "2"})
    v = downgrade_verdict(f, "classic-protocol", small)
    assert v.verdict == NEEDS_ACTION and "group.max.size=2" in v.reason
    v = downgrade_verdict(f, "classic-protocol", Settings(migration_policy="upgrade"))
    assert v.verdict == NEEDS_ACTION
    v = downgrade_verdict(f, "classic-protocol", Settings(migration_policy="disabled"))
    assert v.verdict == UNSAFE and "INCONSISTENT_GROUP_PROTOCOL" in v.reason


def test_kafka_release_target_uses_loader_rules_and_says_when_unknown() -> None:
    f = facts(consumer_group(1), "cg")
    v = downgrade_verdict(f, "kafka-3.7", DEFAULTS)
    assert v.verdict in (SAFE, NEEDS_ACTION, UNSAFE)
    assert v.details and all(c.name.startswith("record-") for c in v.details)
    with pytest.raises(ValueError, match="unknown downgrade target"):
        downgrade_verdict(f, "kafka-1.0", DEFAULTS)


def test_elect_protocol_is_kafkas_vote() -> None:
    assert elect_protocol([("cooperative-sticky", "range"), ("range",)]) == "range"
    assert elect_protocol([("a", "b"), ("b", "a"), ("b", "a")]) == "b"
    assert elect_protocol([("a",), ("b",)]) is None


def test_entries_keep_value_versions_and_compaction() -> None:
    recs = classic_group(classic_member("a"))
    tomb = CoordinatorRecord(GroupMetadataKey("g"), None)
    raw = [encode_record(r) for r in [*recs, tomb, *recs]]
    got, problems = facts_from_entries(raw)
    assert problems == []
    f = got["g"]
    assert f.record_kinds_exact
    assert RecordKind(2, 3, 1) in f.record_kinds
    assert f.offsets == (("orders", 0, 42),)
    # facts are plain data: the fleet scanner pickles them
    assert pickle.loads(pickle.dumps(f)) == f
    # a tombstone deletes the group
    only_tomb = facts_from_records([*recs, tomb])
    assert only_tomb["g"].type == "empty" and only_tomb["g"].members == ()


def test_member_facts_picklable_and_rebalance() -> None:
    m = MemberFacts("m", "rdkafka", assignors=("cooperative-sticky",), assignors_complete=True)
    assert m.rebalance == "cooperative" and m.software == "librdkafka"
    assert pickle.loads(pickle.dumps(m)) == m


# --- downgrade to a Kafka release: the loader rules, per record and per partition ---------------


@pytest.fixture
def rules_37(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loader-rules table for the logic under test (the real rows and their proofs live in
    tools.check.loader_rules and e2e/test_downgrade_rules.py)."""
    from tools.check import loader_rules
    from tools.check.loader_rules import Rule

    rows = (
        Rule(target="kafka-3.7", record_type=1, outcome="read", proven=True),
        Rule(target="kafka-3.7", record_type=2, outcome="read", proven=True),
        Rule(target="kafka-3.7", record_type=3, outcome="fatal", proven=True, note="unknown key"),
        Rule(target="kafka-3.7", record_type=5, outcome="skipped", proven=False),
    )
    monkeypatch.setattr(loader_rules, "RULES", rows)


def test_release_target_per_record(rules_37: None) -> None:
    classic = replace(
        facts(classic_group(classic_member("a"))),
        partition=0,
        log_record_kinds=(RecordKind(1, 3, 1), RecordKind(2, 3, 1), RecordKind(5, None, 1)),
    )
    v = downgrade_verdict(classic, "kafka-3.7", DEFAULTS)
    # a consumer-group tombstone is skipped: nothing lost; the rule is reported as not proven
    assert v.verdict == SAFE, v
    assert any("not proven" in c.reason for c in v.details)
    consumer = replace(
        facts(consumer_group(1), "cg"),
        partition=0,
        log_record_kinds=(RecordKind(3, 0, 1), RecordKind(5, 0, 1)),
    )
    v = downgrade_verdict(consumer, "kafka-3.7", DEFAULTS)
    assert v.verdict == UNSAFE and "fails to load the partition on ConsumerGroupMetadata v0" in v.reason
    assert v.fix == "groupshift records rewrite --for-downgrade kafka-3.7"
    # a classic group sharing the partition is lost with it
    v = downgrade_verdict(classic, "kafka-3.7", DEFAULTS, peers=[classic, consumer])
    assert v.verdict == UNSAFE
    assert "fails to load __consumer_offsets-0 on group cg's ConsumerGroupMetadata v0" in v.reason
    # skipped live state is NEEDS-ACTION; a type without a rule is said to be unknown
    only_members = replace(consumer, log_record_kinds=(RecordKind(5, 0, 1), RecordKind(8, 0, 1)))
    v = downgrade_verdict(only_members, "kafka-3.7", DEFAULTS)
    assert v.verdict == NEEDS_ACTION
    reasons = " | ".join(c.reason for c in v.details)
    assert "skips ConsumerGroupMemberMetadata v0: the group's state would be lost" in reasons
    assert "no rule for ConsumerGroupCurrentMemberAssignment v0" in reasons


def test_assignor_mix_and_custom_assignor_warnings() -> None:
    gid = "mix"
    recs: list[CoordinatorRecord] = [
        CoordinatorRecord(ConsumerGroupMetadataKey(gid), ConsumerGroupMetadataValue(2))
    ]
    for mid, protocols in (("e", ("range",)), ("c", ("cooperative-sticky",))):
        recs.append(
            CoordinatorRecord(
                ConsumerGroupMemberMetadataKey(gid, mid),
                ConsumerGroupMemberMetadataValue(
                    None, None, "consumer-mix-1", "/h", ("orders",), None, 30000, None,
                    ClassicMemberMetadata(10000, tuple(ClassicProtocol(p, b"") for p in protocols)),
                ),
            )
        )  # fmt: skip
    f = facts(recs, gid)
    from tools.check.rules import _upgrade_advice

    mix = [c for c in _upgrade_advice(f, DEFAULTS) if c.name == "assignor-mix"]
    assert mix and mix[0].status == "warning" and "INCONSISTENT_GROUP_PROTOCOL" in mix[0].reason
    v = upgrade_verdict(facts(classic_group(classic_member("a"), protocol="my-assignor")), DEFAULTS)
    assert v.verdict == READY
    custom = [c for c in v.details if c.name == "custom-assignor"]
    assert custom and custom[0].status == "warning" and "my-assignor" in custom[0].reason
    # the server assignor a non-range group gets is the default, uniform: said as info
    assignor = [c for c in v.details if c.name == "server-assignor"]
    assert assignor and assignor[0].status == "info" and "uniform" in assignor[0].reason


def test_settings_from_broker_configs() -> None:
    s = Settings.from_configs(
        {
            "group.consumer.migration.policy": "UPGRADE",
            "group.consumer.max.size": "10",
            "group.max.size": None,
            "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor,uniform",
        }
    )
    assert (s.migration_policy, s.consumer_max_size, s.consumer_assignors) == (
        "upgrade",
        10,
        ("range", "uniform"),
    )
    assert s.known == {
        "group.consumer.migration.policy",
        "group.consumer.max.size",
        "group.consumer.assignors",
    }
    with pytest.raises(ValueError):
        Settings.from_configs({"group.consumer.migration.policy": "sideways"})
    # range is the broker default: a range group gets it without asking
    v = upgrade_verdict(facts(classic_group(classic_member("a"))), s)
    assert [c.status for c in v.details if c.name == "server-assignor"] == ["info"]


def test_the_text_output_names_checks_in_words() -> None:
    from tools.check.rules import check_title

    assert check_title("record-3") == "ConsumerGroupMetadata records"
    assert check_title("record-16") == "ConsumerGroupRegularExpression records"
    assert check_title("record-99") == "type 99 records"
    assert check_title("assignor-mix") == "eager and cooperative members"
    assert check_title("policy") == "policy"


# --- streams groups (KIP-1071) ------------------------------------------------------------------


def streams_group(*members: str, group: str = "app") -> list[CoordinatorRecord]:
    """A streams group's records as Kafka 4.4 writes them: metadata, and per member its metadata
    and current assignment (one active task each), plus one committed offset."""
    from records.streams_group import (
        StreamsGroupCurrentMemberAssignmentKey,
        StreamsGroupCurrentMemberAssignmentValue,
        StreamsGroupMemberMetadataKey,
        StreamsGroupMemberMetadataValue,
        StreamsGroupMetadataKey,
        StreamsGroupMetadataValue,
        TaskIds,
    )

    out = [
        CoordinatorRecord(StreamsGroupMetadataKey(group), StreamsGroupMetadataValue(epoch=4, metadata_hash=0))
    ]
    for i, m in enumerate(members):
        client = f"{m}-StreamThread-1-consumer"
        meta = StreamsGroupMemberMetadataValue(
            None, None, client, "/127.0.0.1", 300000, 0, f"process-{m}", None, ()
        )
        tasks = (TaskIds("0", (i,)),)
        current = StreamsGroupCurrentMemberAssignmentValue(4, 3, 1, tasks, (), ())
        out.append(CoordinatorRecord(StreamsGroupMemberMetadataKey(group, m), meta))
        out.append(CoordinatorRecord(StreamsGroupCurrentMemberAssignmentKey(group, m), current))
    out.append(CoordinatorRecord(OffsetCommitKey(group, "words", 0), OffsetCommitValue(7, -1, "", 0)))
    return out


def test_streams_group_facts_from_records_and_their_verdicts() -> None:
    """A streams group read from its records (types 17, 19, 22) is a "streams" group with its
    members and their active tasks; upgrade has nothing to do; going back to classic follows
    Kafka 4.4's offline rule (only an empty group, INCONSISTENT_GROUP_PROTOCOL before) and says
    the online conversion is not judged yet."""
    f = facts_from_entries([encode_record(r) for r in streams_group("a", "b")])[0]["app"]
    assert (f.type, f.generation, f.size) == ("streams", 4, 2)
    assert [m.active_tasks for m in f.members] == [(("0", 0),), (("0", 1),)]
    assert {m.protocol for m in f.members} == {"streams"} and f.offsets == (("words", 0, 7),)
    assert pickle.loads(pickle.dumps(f)) == f
    up = upgrade_verdict(f, DEFAULTS)
    assert up.verdict == READY and "already a streams group" in up.reason
    down = downgrade_verdict(f, "classic-protocol", DEFAULTS)
    assert down.verdict == NEEDS_ACTION and "INCONSISTENT_GROUP_PROTOCOL" in down.reason
    assert down.fix is not None and "group.protocol=classic" in down.fix
    assert any(c.name == "streams-online-conversion" and "not judged" in c.reason for c in down.details)
    empty = facts_from_records(streams_group())["app"]
    assert empty.type == "streams" and empty.size == 0
    assert downgrade_verdict(empty, "classic-protocol", DEFAULTS).verdict == SAFE


def test_streams_group_record_kinds_against_older_releases() -> None:
    """A streams group's records are unknown to a Kafka release without streams groups: going
    back to one is not SAFE for the group's partition (loader rules, types 17 and 19-23)."""
    f = facts(streams_group("a"), "app")
    kinds = {k.record_type for k in inferred_record_kinds(f)}
    assert {17, 19, 20, 21, 22, 23} <= kinds
    assert downgrade_verdict(f, "kafka-3.9", DEFAULTS).verdict != SAFE

"""Group administration through real admin clients (confluent-kafka AdminClient and
kafka-python KafkaAdminClient) against one gateway holding groups of both types, live and empty:
ListGroups (with types), DescribeGroups / ConsumerGroupDescribe, OffsetFetch and admin
OffsetCommit (list / alter committed offsets), and DeleteGroups (empty groups go, live ones
answer NON_EMPTY_GROUP).
"""

from __future__ import annotations

import time

from e2e.conftest import Gateways
from e2e.expected import COUNT, PARTITIONS, PER_PARTITION
from e2e.groups import (
    FAST_GROUP_SETTINGS,
    ConfluentMember,
    Ledger,
    committed_offsets,
    create_topic,
    produce,
    requests_seen,
    wait_partitioned,
    wait_until,
)

TOPIC = "admin-orders"
LIVE_CLASSIC, LIVE_CONSUMER = "admin-live-classic", "admin-live-consumer"
EMPTY_CLASSIC, EMPTY_CONSUMER, SIMPLE = "admin-empty-classic", "admin-empty-consumer", "admin-simple"
NON_EMPTY_GROUP, UNKNOWN_MEMBER_ID = 68, 25
END = dict.fromkeys(range(PARTITIONS), PER_PARTITION)


def start_group(gw, group: str, protocol: str, n: int = 3) -> list[ConfluentMember]:
    ledger = Ledger(TOPIC)
    config = {"group.protocol": "consumer"} if protocol == "consumer" else {}
    members = [
        ConfluentMember(f"{group}-{i}", ledger, gw.bootstrap, group, **config).start() for i in range(n)
    ]
    wait_partitioned(members, f"{group} to assign the partitions", per_member=PARTITIONS // n)
    wait_until(lambda: ledger.distinct() >= COUNT, 60, f"{group} to consume everything")
    wait_until(lambda: committed_offsets(gw, group, TOPIC) == END, 20, f"{group} to commit")
    return members


def tp_offsets(result) -> dict[int, int]:
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == TOPIC}


def error_code(exc: BaseException) -> int:
    return exc.args[0].code()


def test_admin_clients_on_groups_of_both_types(gateways: Gateways) -> None:
    from confluent_kafka import (
        ConsumerGroupState,
        ConsumerGroupTopicPartitions,
        ConsumerGroupType,
        KafkaException,
        TopicPartition,
    )
    from confluent_kafka.admin import AdminClient
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata

    gw = gateways.start("admin", sets=[*FAST_GROUP_SETTINGS, "metrics.listen=127.0.0.1:0"])
    create_topic(gw, TOPIC)
    produce(gw, TOPIC, range(COUNT))

    # Empty groups with offsets: members that consumed everything, committed and left.
    for group, protocol in ((EMPTY_CLASSIC, "classic"), (EMPTY_CONSUMER, "consumer")):
        for m in start_group(gw, group, protocol, n=1):
            m.stop()
    live = start_group(gw, LIVE_CLASSIC, "classic") + start_group(gw, LIVE_CONSUMER, "consumer")

    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    kp = KafkaAdminClient(bootstrap_servers=gw.bootstrap, request_timeout_ms=10000)
    try:
        # -- alter offsets: an admin commit creates a simple group; live groups refuse it
        simple = {0: 7, 3: 42}
        alter = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(SIMPLE, [TopicPartition(TOPIC, p, o) for p, o in simple.items()])]
        )
        assert tp_offsets(alter[SIMPLE].result(15)) == simple
        kp.alter_group_offsets(EMPTY_CLASSIC, {KpTopicPartition(TOPIC, 1): OffsetAndMetadata(11, "", -1)})
        for group in (LIVE_CLASSIC, LIVE_CONSUMER):
            refused = admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, [TopicPartition(TOPIC, 0, 0)])]
            )
            try:
                errors = [
                    tp.error.code() if tp.error else 0 for tp in refused[group].result(15).topic_partitions
                ]
            except KafkaException as e:
                errors = [error_code(e)]
            assert errors == [UNKNOWN_MEMBER_ID], (group, errors)

        # -- list groups, with types
        listed = admin.list_consumer_groups().result(15)
        assert listed.errors == []
        by_id = {g.group_id: g for g in listed.valid}
        assert set(by_id) == {LIVE_CLASSIC, LIVE_CONSUMER, EMPTY_CLASSIC, EMPTY_CONSUMER, SIMPLE}
        assert {g: (by_id[g].type, by_id[g].state) for g in by_id} == {
            LIVE_CLASSIC: (ConsumerGroupType.CLASSIC, ConsumerGroupState.STABLE),
            LIVE_CONSUMER: (ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE),
            EMPTY_CLASSIC: (ConsumerGroupType.CLASSIC, ConsumerGroupState.EMPTY),
            EMPTY_CONSUMER: (ConsumerGroupType.CONSUMER, ConsumerGroupState.EMPTY),
            SIMPLE: (ConsumerGroupType.CLASSIC, ConsumerGroupState.EMPTY),
        }
        assert by_id[SIMPLE].is_simple_consumer_group
        assert not by_id[LIVE_CLASSIC].is_simple_consumer_group
        consumer_only = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(15)
        assert {g.group_id for g in consumer_only.valid} == {LIVE_CONSUMER, EMPTY_CONSUMER}
        stable_classic = admin.list_consumer_groups(
            types={ConsumerGroupType.CLASSIC}, states={ConsumerGroupState.STABLE}
        ).result(15)
        assert {g.group_id for g in stable_classic.valid} == {LIVE_CLASSIC}
        kp_listed = {g["group_id"]: g for g in kp.list_groups()}
        assert {g: kp_listed[g]["group_type"] for g in kp_listed} == {
            LIVE_CLASSIC: "classic",
            EMPTY_CLASSIC: "classic",
            SIMPLE: "classic",
            LIVE_CONSUMER: "consumer",
            EMPTY_CONSUMER: "consumer",
        }
        assert kp_listed[SIMPLE]["protocol_type"] == ""
        assert {g["group_id"] for g in kp.list_groups(types_filter=["consumer"])} == {
            LIVE_CONSUMER,
            EMPTY_CONSUMER,
        }

        # -- describe: ConsumerGroupDescribe for the consumer group, DescribeGroups for classic
        described = {
            g: f.result(15)
            for g, f in admin.describe_consumer_groups([LIVE_CLASSIC, LIVE_CONSUMER, EMPTY_CONSUMER]).items()
        }
        for group, kind, assignor in (
            (LIVE_CLASSIC, ConsumerGroupType.CLASSIC, "range"),
            (LIVE_CONSUMER, ConsumerGroupType.CONSUMER, "uniform"),
        ):
            d = described[group]
            assert (d.type, d.state, d.partition_assignor) == (kind, ConsumerGroupState.STABLE, assignor)
            assert sorted(m.client_id for m in d.members) == [f"{group}-{i}" for i in range(3)]
            parts = [tp.partition for m in d.members for tp in m.assignment.topic_partitions]
            assert sorted(parts) == list(range(PARTITIONS)), (group, parts)
            mine = {m.name: m.assignment for m in live if m.name.startswith(group)}
            assert {
                m.client_id: frozenset(tp.partition for tp in m.assignment.topic_partitions)
                for m in d.members
            } == mine
        assert described[LIVE_CONSUMER].members[0].target_assignment is not None
        assert (described[EMPTY_CONSUMER].state, described[EMPTY_CONSUMER].members) == (
            ConsumerGroupState.EMPTY,
            [],
        )
        # librdkafka asked ConsumerGroupDescribe first and fell back to DescribeGroups for the
        # classic group (GROUP_ID_NOT_FOUND from ConsumerGroupDescribe)
        assert requests_seen(gw, "ConsumerGroupDescribe") and requests_seen(gw, "DescribeGroups")

        kp_described = kp.describe_groups([LIVE_CLASSIC, LIVE_CONSUMER, EMPTY_CLASSIC])
        classic = kp_described[LIVE_CLASSIC]
        assert (
            classic["error"],
            classic["group_state"],
            classic["protocol_type"],
            classic["protocol_data"],
        ) == (None, "Stable", "consumer", "range")
        kp_parts = {
            m["client_id"]: frozenset(
                p for t in m["member_assignment"]["assigned_partitions"] for p in t["partitions"]
            )
            for m in classic["members"]
        }
        assert kp_parts == {m.name: m.assignment for m in live if m.name.startswith(LIVE_CLASSIC)}
        assert all(m["member_metadata"]["topics"] == [TOPIC] for m in classic["members"])
        assert kp_described[EMPTY_CLASSIC]["group_state"] == "Empty"
        assert kp_described[EMPTY_CLASSIC]["members"] == []
        as_classic = kp_described[LIVE_CONSUMER]
        assert (as_classic["error"], as_classic["group_state"]) == (None, "Stable")
        assert len(as_classic["members"]) == 3

        # -- list offsets (OffsetFetch) through both clients
        for group in (LIVE_CLASSIC, LIVE_CONSUMER, EMPTY_CONSUMER):
            got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
            assert tp_offsets(got[group].result(15)) == END, group
        assert committed_offsets(gw, EMPTY_CLASSIC, TOPIC) == {**END, 1: 11}
        assert committed_offsets(gw, SIMPLE, TOPIC) == simple

        # -- delete groups: live ones are NON_EMPTY_GROUP, empty ones go with their offsets
        futures = admin.delete_consumer_groups([LIVE_CLASSIC, LIVE_CONSUMER, EMPTY_CONSUMER])
        for group in (LIVE_CLASSIC, LIVE_CONSUMER):
            try:
                futures[group].result(15)
                raise AssertionError(f"deleting live group {group} succeeded")
            except KafkaException as e:
                assert error_code(e) == NON_EMPTY_GROUP, e
        assert futures[EMPTY_CONSUMER].result(15) is None
        assert kp.delete_groups([EMPTY_CLASSIC, SIMPLE, "admin-never-existed", LIVE_CLASSIC]) == {
            EMPTY_CLASSIC: "OK",
            SIMPLE: "OK",
            "admin-never-existed": "GroupIdNotFoundError",
            LIVE_CLASSIC: "NonEmptyGroupError",
        }
        listed_after = {g.group_id for g in admin.list_consumer_groups().result(15).valid}
        assert listed_after == {LIVE_CLASSIC, LIVE_CONSUMER}
        for group in (EMPTY_CLASSIC, EMPTY_CONSUMER, SIMPLE):
            assert committed_offsets(gw, group, TOPIC) == {}, group
        deleted = [e["group"] for e in gw.events("group.deleted")]
        assert sorted(deleted) == sorted([EMPTY_CLASSIC, EMPTY_CONSUMER, SIMPLE])

        # the live groups never noticed: no member left or was fenced
        assert all(m.live and not m.errors for m in live)
        time.sleep(0.5)
        assert all(m.assignment for m in live)
    finally:
        kp.close()
        for m in live:
            m.stop()

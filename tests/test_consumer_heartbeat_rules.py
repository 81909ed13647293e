"""ConsumerGroupHeartbeat handling, epochs, leaving, target assignment and group state
(KIP-848 consumer group protocol). Each test pins one rule and asserts the records written."""

from __future__ import annotations

from engine.config import GroupConfig
from engine.consumer.group import ConsumerGroupState
from engine.consumer.member import MemberState
from engine.errors import Errors
from records.consumer_group import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberValue,
    TopicPartitions,
)
from tests.consumer_harness import BAR, FOO, Harness, tp


def test_first_join_writes_records_in_kafka_order() -> None:
    h = Harness()
    r = h.join("m1")
    assert r.error_code == 0
    # member, subscription metadata, group epoch, target member, target epoch, current assignment
    assert h.record_types() == ["k5", "k4", "k3", "k7", "k6", "k8"]
    assert h.records[2].value == ConsumerGroupMetadataValue(2)
    assert r.member_epoch == 2
    assert r.assignment == (tp(FOO, 0, 1, 2, 3, 4, 5),)


def test_heartbeat_to_missing_group_with_nonzero_epoch_is_group_id_not_found() -> None:
    r = Harness().hb(member_id="m1", member_epoch=6)
    assert (r.error_code, r.error_message) == (Errors.GROUP_ID_NOT_FOUND, "Consumer group g not found.")


def test_unknown_member_with_nonzero_epoch_is_unknown_member_id() -> None:
    h = Harness()
    h.join("m1")
    r = h.hb(member_id="ghost", member_epoch=2)
    assert r.error_code == Errors.UNKNOWN_MEMBER_ID
    assert r.error_message == "Member ghost is not a member of group g."


def test_full_group_rejects_new_members_but_not_existing_ones() -> None:
    h = Harness(group_consumer_max_size=1)
    h.join("m1")
    r = h.join("m2")
    assert r.error_code == Errors.GROUP_MAX_SIZE_REACHED
    assert r.error_message == "The consumer group has reached its maximum capacity of 1 members."
    assert h.hb(member_id="m1", member_epoch=2).error_code == 0


def test_steady_heartbeat_with_null_fields_writes_nothing_and_returns_no_assignment() -> None:
    h = Harness()
    h.join("m1")
    r = h.hb(member_id="m1", member_epoch=2)
    assert r.error_code == 0 and r.member_epoch == 2
    assert h.records == []
    assert r.assignment is None
    assert r.heartbeat_interval_ms == 5000


def test_full_request_always_gets_the_assignment() -> None:
    h = Harness()
    h.join("m1")
    r = h.hb(
        member_id="m1",
        member_epoch=2,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=["foo"],
        topic_partitions=[tp(FOO, 0, 1, 2, 3, 4, 5)],
    )
    assert h.records == []
    assert r.assignment == (tp(FOO, 0, 1, 2, 3, 4, 5),)


def test_subscription_change_bumps_the_group_epoch() -> None:
    h = Harness()
    h.join("m1")
    r = h.hb(member_id="m1", member_epoch=2, subscribed_topic_names=["foo", "bar"])
    assert h.record_types() == ["k5", "k4", "k3", "k7", "k6", "k8"]
    assert r.member_epoch == 3
    assert {t.topic_id for t in r.assignment or ()} == {FOO, BAR}


def test_same_topics_in_another_order_are_not_a_subscription_change() -> None:
    h = Harness()
    h.join("m1", topics=("foo", "bar"))
    h.hb(member_id="m1", member_epoch=2, subscribed_topic_names=["bar", "foo", "foo"])
    assert h.records == []


def test_rack_change_is_written_without_a_bump() -> None:
    """Kafka 4.3 `hasMemberSubscriptionChanged`: only subscribed topics bump the epoch; a new
    rack is recorded and counts at the next bump."""
    h = Harness()
    h.join("m1")
    r = h.hb(member_id="m1", member_epoch=2, rack_id="rack-b")
    assert h.record_types() == ["k5"]
    assert r.member_epoch == 2 and h.group.group_epoch == 2
    assert h.member("m1").rack_id == "rack-b"


def test_server_assignor_change_is_written_without_a_bump() -> None:
    h = Harness()
    h.join("m1")
    h.hb(member_id="m1", member_epoch=2, server_assignor="range")
    assert h.record_types() == ["k5"]
    assert h.group.group_epoch == 2


def test_client_id_change_rewrites_the_member_without_a_bump() -> None:
    h = Harness()
    h.join("m1")
    h.ctx = h.ctx.__class__("client-2", "/127.0.0.1", 1)
    h.hb(member_id="m1", member_epoch=2)
    assert h.record_types() == ["k5"]
    assert h.group.group_epoch == 2
    assert h.member("m1").client_id == "client-2"


def test_greater_member_epoch_is_fenced() -> None:
    h = Harness()
    h.join("m1")
    r = h.hb(member_id="m1", member_epoch=3)
    assert r.error_code == Errors.FENCED_MEMBER_EPOCH
    assert "greater member epoch (3)" in (r.error_message or "")


def test_smaller_epoch_is_accepted_after_a_lost_response_when_owned_is_a_subset() -> None:
    h = Harness()
    h.join("m1")
    h.join("m2")  # m1 must give up half: it moves through revocation to epoch 2
    r = h.hb(member_id="m1", member_epoch=2)
    assert h.member("m1").state is MemberState.UNREVOKED_PARTITIONS
    r = h.ack("m1", r)
    assert r.member_epoch == 3 and h.member("m1").previous_member_epoch == 2
    # The epoch-2 response was lost: m1 retries with epoch 1 and what it owns.
    r2 = h.ack("m1", r.__class__(member_epoch=2, assignment=r.assignment))
    assert r2.error_code == 0 and r2.member_epoch == 3


def test_smaller_epoch_without_owned_partitions_is_fenced() -> None:
    h = Harness()
    h.join("m1")
    h.join("m2")
    r = h.hb(member_id="m1", member_epoch=2)
    h.ack("m1", r)
    r = h.hb(member_id="m1", member_epoch=2)  # previous epoch, owned not reported
    assert r.error_code == Errors.FENCED_MEMBER_EPOCH
    assert "smaller member epoch (2)" in (r.error_message or "")


def test_smaller_epoch_owning_more_than_assigned_is_fenced() -> None:
    h = Harness()
    h.join("m1")
    h.join("m2")
    r = h.hb(member_id="m1", member_epoch=2)
    h.ack("m1", r)
    r = h.hb(member_id="m1", member_epoch=2, topic_partitions=[tp(FOO, 0, 1, 2, 3, 4, 5)])
    assert r.error_code == Errors.FENCED_MEMBER_EPOCH


def test_known_member_rejoining_with_epoch_zero_keeps_its_assignment() -> None:
    # KAFKA-19233: a member that believes it was fenced may rejoin with epoch 0.
    h = Harness()
    h.join("m1")
    r = h.join("m1")
    assert r.error_code == 0 and r.member_epoch == 2
    assert r.assignment == (tp(FOO, 0, 1, 2, 3, 4, 5),)
    assert len(h.group.members) == 1


def test_leave_writes_tombstones_in_replay_order_then_bumps_the_epoch() -> None:
    h = Harness()
    h.join("m1")
    h.join("m2")
    r = h.hb(member_id="m2", member_epoch=-1)
    assert (r.error_code, r.member_id, r.member_epoch) == (0, "m2", -1)
    assert h.record_types() == ["k8-", "k7-", "k5-", "k3"]
    assert h.records[-1].value == ConsumerGroupMetadataValue(4)
    assert set(h.group.members) == {"m1"}
    assert not any("m2" in k for k in h.timer_keys())


def test_last_member_leaving_also_rewrites_the_subscription_metadata() -> None:
    h = Harness()
    h.join("m1")
    h.hb(member_id="m1", member_epoch=-1)
    assert h.record_types() == ["k8-", "k7-", "k5-", "k4", "k3"]
    assert h.group.state() is ConsumerGroupState.EMPTY
    assert h.group.subscription_metadata == {}


def test_leave_of_missing_group_is_group_id_not_found() -> None:
    r = Harness().hb(member_id="m1", member_epoch=-1)
    assert r.error_code == Errors.GROUP_ID_NOT_FOUND


def test_leave_of_unknown_member_is_unknown_member_id() -> None:
    h = Harness()
    h.join("m1")
    assert h.hb(member_id="m9", member_epoch=-1).error_code == Errors.UNKNOWN_MEMBER_ID


def test_target_assignment_records_only_members_whose_target_changed() -> None:
    h = Harness(topics={"foo": 6, "bar": 3})
    h.join("m1", topics=("foo",))
    h.join("m2", topics=("bar",))  # heterogeneous: m1 keeps all of foo
    targets = [r for r in h.records if isinstance(r.value, ConsumerGroupTargetAssignmentMemberValue)]
    assert [r.key.member_id for r in targets] == ["m2"]  # type: ignore[union-attr]


def test_most_common_server_assignor_is_used_else_the_first_configured() -> None:
    h = Harness(topics={"foo": 4, "bar": 4})
    h.join("m1", topics=("foo", "bar"))
    assert h.group.preferred_server_assignor() is None
    h.join("m2", topics=("foo", "bar"), server_assignor="range")
    # range co-partitions: the same partition numbers of foo and bar go to the same member
    h.converge("m1", "m2")
    for m in ("m1", "m2"):
        a = h.member(m).assigned_partitions
        assert sorted(a[FOO]) == sorted(a[BAR])
    described = h.shard.describe_consumer_groups(["g"])[0]
    assert described.assignor_name == "range"


def test_group_state_follows_epochs_and_reconciliation() -> None:
    h = Harness()
    h.join("m1")
    assert h.group.state() is ConsumerGroupState.STABLE
    h.join("m2")
    assert h.group.state() is ConsumerGroupState.RECONCILING  # m1 must revoke, m2 waits
    h.converge("m1", "m2")
    assert h.group.state() is ConsumerGroupState.STABLE
    h.hb(
        member_id="m1",
        member_epoch=h.member("m1").member_epoch,
        topic_partitions=None,
        subscribed_topic_names=["foo", "bar"],
    )
    assert h.group.state() is ConsumerGroupState.RECONCILING
    h.group.group_epoch += 1  # a bump without a target yet
    assert h.group.state() is ConsumerGroupState.ASSIGNING


def test_heartbeat_interval_and_session_timeout_honour_group_overrides() -> None:
    h = Harness()
    h.shard.set_group_config(
        "g",
        GroupConfig.model_validate(
            {"consumer.heartbeat.interval.ms": 200, "consumer.session.timeout.ms": 1000}
        ),
    )
    r = h.join("m1")
    assert r.heartbeat_interval_ms == 200
    assert h.shard.timers.deadline("session-timeout-g-m1") == h.now + 1000


def test_describe_and_list_report_consumer_groups() -> None:
    h = Harness()
    h.join("m1", rack_id="r1")
    [d] = h.shard.describe_consumer_groups(["g"])
    assert (d.group_state, d.group_epoch, d.assignment_epoch, d.assignor_name) == ("Stable", 2, 2, "uniform")
    [m] = d.members
    assert (m.member_id, m.member_epoch, m.rack_id, m.client_id, m.member_type) == (
        "m1",
        2,
        "r1",
        "client-1",
        1,
    )
    assert m.assignment[0].topic_name == "foo" and m.assignment[0].partitions == (0, 1, 2, 3, 4, 5)
    assert m.target_assignment == m.assignment
    [missing] = h.shard.describe_consumer_groups(["nope"])
    assert missing.error_code == Errors.GROUP_ID_NOT_FOUND
    [listed] = h.shard.list_consumer_groups()
    assert (listed.group_id, listed.group_state, listed.group_type) == ("g", "Stable", "consumer")


def test_current_assignment_record_carries_epochs_state_and_partitions() -> None:
    h = Harness()
    h.join("m1")
    h.join("m2")
    h.hb(member_id="m1", member_epoch=2)
    [rec] = h.records
    # m1 got all six partitions at epoch 2: each keeps that assignment epoch while revoking.
    assert rec.value == ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=2,
        previous_member_epoch=2,
        state=1,
        assigned_partitions=(TopicPartitions(FOO, (0, 1, 2), (2, 2, 2)),),
        partitions_pending_revocation=(TopicPartitions(FOO, (3, 4, 5), (2, 2, 2)),),
    )

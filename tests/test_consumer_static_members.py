"""Static members on the KIP-848 path (KIP-345 semantics, KIP-848 consumer group protocol)."""

from __future__ import annotations

from engine.consumer.member import MemberState
from engine.errors import Errors
from records.consumer_group import ConsumerGroupCurrentMemberAssignmentValue
from tests.consumer_harness import FOO, Harness, tp


def _stable_pair(h: Harness) -> None:
    h.join("a1", instance_id="i-a")
    h.join("b1", instance_id="i-b")
    h.converge("a1", "b1")


def test_static_temporary_leave_keeps_the_assignment_without_a_bump() -> None:
    h = Harness()
    _stable_pair(h)
    epoch = h.group.group_epoch
    owned = dict(h.member("a1").assigned_partitions)
    r = h.hb(member_id="a1", member_epoch=-2, instance_id="i-a")
    assert (r.error_code, r.member_id, r.member_epoch) == (0, "a1", -2)
    assert h.record_types() == ["k8"]
    value = h.records[0].value
    assert isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
    assert value.member_epoch == -2 and value.partitions_pending_revocation == ()
    assert h.group.group_epoch == epoch
    assert dict(h.member("a1").assigned_partitions) == owned
    # The partitions stay owned: nobody else can be given them.
    assert all(h.group.current_partition_epoch(FOO, p) == -2 for p in owned[FOO])


def test_static_member_restarting_within_session_gets_its_partitions_back_without_rebalance() -> None:
    h = Harness()
    _stable_pair(h)
    epoch = h.group.group_epoch
    a_parts = dict(h.member("a1").assigned_partitions)
    b_before = h.member("b1")
    h.hb(member_id="a1", member_epoch=-2, instance_id="i-a")
    r = h.join("a2", instance_id="i-a")  # the restarted process, a new member id
    assert r.error_code == 0
    assert r.member_epoch == epoch
    assert {t.topic_id: t.partitions for t in r.assignment or ()} == a_parts
    assert h.group.group_epoch == epoch  # no rebalance
    assert h.member("b1") == b_before  # the other member is untouched
    assert "a1" not in h.group.members and h.group.static_members["i-a"] == "a2"
    # Kafka's replaceMember: the old member's tombstones, then the new member's records.
    assert h.record_types()[:6] == ["k8-", "k7-", "k5-", "k5", "k7", "k8"]


def test_second_live_static_member_with_same_instance_id_gets_unreleased_instance_id() -> None:
    h = Harness()
    h.join("a1", instance_id="i-a")
    r = h.join("a2", instance_id="i-a")
    assert r.error_code == Errors.UNRELEASED_INSTANCE_ID
    assert "owned by a1" in (r.error_message or "")
    assert set(h.group.members) == {"a1"}


def test_static_member_rejoining_with_new_subscription_triggers_a_rebalance() -> None:
    h = Harness()
    _stable_pair(h)
    epoch = h.group.group_epoch
    h.hb(member_id="a1", member_epoch=-2, instance_id="i-a")
    h.join("a2", topics=("foo", "bar"), instance_id="i-a")
    assert h.group.group_epoch == epoch + 1


def test_static_heartbeat_with_another_member_id_is_fenced_instance_id() -> None:
    h = Harness()
    h.join("a1", instance_id="i-a")
    r = h.hb(member_id="zz", member_epoch=1, instance_id="i-a")
    assert r.error_code == Errors.FENCED_INSTANCE_ID


def test_static_heartbeat_with_unknown_instance_is_unknown_member_id() -> None:
    h = Harness()
    h.join("a1", instance_id="i-a")
    r = h.hb(member_id="a1", member_epoch=1, instance_id="i-x")
    assert (r.error_code, r.error_message) == (Errors.UNKNOWN_MEMBER_ID, "Instance id i-x is unknown.")


def test_static_leave_with_wrong_member_id_is_fenced_instance_id() -> None:
    h = Harness()
    h.join("a1", instance_id="i-a")
    assert h.hb(member_id="a9", member_epoch=-2, instance_id="i-a").error_code == Errors.FENCED_INSTANCE_ID


def test_static_leave_with_epoch_minus_one_fences_the_member() -> None:
    h = Harness()
    h.join("a1", instance_id="i-a")
    h.hb(member_id="a1", member_epoch=-1, instance_id="i-a")
    assert h.group.members == {} and h.group.static_members == {}


def test_static_member_not_back_within_its_session_timeout_is_fenced() -> None:
    h = Harness()
    _stable_pair(h)
    h.hb(member_id="a1", member_epoch=-2, instance_id="i-a")
    h.hb(member_id="b1", member_epoch=h.member("b1").member_epoch)
    outs = h.advance(44_990)
    assert outs == [] and "a1" in h.group.members
    h.hb(member_id="b1", member_epoch=h.member("b1").member_epoch)
    outs = h.advance(20)
    assert [e for o in outs for e, _ in o.events] == ["member.fenced"]
    assert "a1" not in h.group.members and "b1" in h.group.members
    assert h.member("b1").state in (MemberState.STABLE, MemberState.UNRELEASED_PARTITIONS)


def test_static_takeover_target_is_inherited_by_the_new_member_id() -> None:
    h = Harness()
    _stable_pair(h)
    target = dict(h.group.target("a1"))
    h.hb(member_id="a1", member_epoch=-2, instance_id="i-a")
    h.join("a2", instance_id="i-a")
    assert dict(h.group.target("a2")) == target
    assert "a1" not in h.group.target_assignment
    assert h.member("a2").assigned_partitions == target
    r = h.hb(
        member_id="a2",
        member_epoch=h.member("a2").member_epoch,
        instance_id="i-a",
        topic_partitions=[tp(FOO, *target[FOO])],
    )
    assert r.error_code == 0 and h.records == []

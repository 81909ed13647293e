"""`group.consumer.migration.policy` and every reason a conversion is refused (KIP-848 "Supporting Online
Consumer Group Upgrade"; migration pitfall #2), plus the rebalance after a static replacement downgrade
(KAFKA-19546).

A refused upgrade answers what Kafka answers — GROUP_ID_NOT_FOUND with Kafka's message — and the
outcome carries a `group.conversion_refused` event naming the direction and the reason, so an
operator can see why a group did not migrate. A refused downgrade is not an error for anyone:
the member just leaves (or replaces) and the group stays a consumer group, with the same event.

KAFKA-20273 (Kafka 4.3: also rebalance after a downgrade when the target assignment is stale
because assignment batching or offloading is enabled) does not apply: groupshift computes
every target assignment inside the operation that needs it, so a downgrade never sees a stale
target.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine.classic.member import Protocol
from engine.classic.state import ClassicGroupState
from engine.errors import Errors
from engine.outcome import Pending
from records.coordinator import CoordinatorRecord
from records.offsets import OffsetCommitKey, OffsetCommitValue
from tests.migration_harness import ClassicSeed, MigrationHarness, assignment, by_id, sub
from tests.migration_records import classic_meta
from tests.test_migration_scenarios import cg_member, joined

POLICIES = ["bidirectional", "upgrade", "downgrade", "disabled"]
UPGRADES = {"bidirectional", "upgrade"}
DOWNGRADES = {"bidirectional", "downgrade"}
CANNOT_UPGRADE = "Cannot upgrade classic group g to consumer group because "  # Kafka 4.3's words
S = ClassicGroupState


def harness(policy: str = "bidirectional", **config: Any) -> MigrationHarness:
    return MigrationHarness(
        topics={"foo": 6, "bar": 3},
        prepared_assignor=True,
        **{"group.consumer.migration.policy": policy},
        **config,
    )


def classic_group(h: MigrationHarness, members: int = 2, **kw: Any) -> None:
    """A Stable classic consumer group at generation 5; member i owns foo-i."""
    h.seed_classic(
        5,
        [
            ClassicSeed(f"c{i}", kw.get("subscription", sub("foo", version=3)), assignment(3, foo=[i]))
            for i in range(members)
        ],
        protocol_type=kw.get("protocol_type", "consumer"),
    )


def assert_upgrade_refused(h: MigrationHarness, reason: str, message: str) -> dict[str, Any]:
    """The joiner is answered GROUP_ID_NOT_FOUND with `message`, nothing is written, the group
    is still the same classic group, and one refusal event names `reason`."""
    classic = h.shard.classic_group("g")
    before = h.shard.persisted_state()
    r = h.cgh("new", 0)
    assert (r.error_code, r.error_message) == (Errors.GROUP_ID_NOT_FOUND, message)
    assert h.last is not None and list(h.last.records) == []
    assert h.shard.classic_group("g") is classic and h.shard.persisted_state() == before
    [event] = h.events("group.conversion_refused")
    assert (event["group"], event["direction"], event["reason"]) == ("g", "upgrade", reason)
    return event


def mixed_group(h: MigrationHarness, *, static: bool = False) -> None:
    """A consumer group at epoch 10: classic c1 (foo-0..2) and the last consumer-protocol member
    k1 (foo-3..5), static with instance id "i1" when `static`."""
    c1 = cg_member(
        "c1",
        topics=("foo",),
        classic=classic_meta(5000, ("range", sub("foo", version=3))),
        assigned=by_id(foo=[0, 1, 2]),
    )
    k1 = cg_member(
        "k1",
        topics=("foo",),
        instance="i1" if static else None,
        client=("kip848", "/h"),
        assigned=by_id(foo=[3, 4, 5]),
    )
    h.seed_consumer_group(10, [c1, k1], metadata=["foo"])


# --- the policy, both directions -----------------------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
def test_upgrade_follows_the_policy(policy: str) -> None:
    """A ConsumerGroupHeartbeat joining a non-empty classic group converts it only when the
    policy allows upgrades; otherwise GROUP_ID_NOT_FOUND and a `policy` refusal."""
    h = harness(policy)
    classic_group(h)

    if policy in UPGRADES:
        r = h.cgh("new", 0)
        assert r.error_code == Errors.NONE and r.member_epoch == 6
        assert h.shard.classic_group("g") is None and h.shard.consumer_group("g") is not None
        assert h.events("group.conversion_refused") == []
    else:
        event = assert_upgrade_refused(h, "policy", CANNOT_UPGRADE + "online upgrade is disabled.")
        assert event["policy"] == policy


@pytest.mark.parametrize("policy", POLICIES)
def test_downgrade_follows_the_policy(policy: str) -> None:
    """The last consumer-protocol member leaving converts the group back only when the policy
    allows downgrades; otherwise it is an ordinary fence (tombstones, epoch bump), the group
    stays a consumer group with its classic member, and the refusal says `policy`. The leave is
    answered the same either way."""
    h = harness(policy)
    mixed_group(h)

    r = h.cgh("k1", -1)

    assert (r.error_code, r.member_id, r.member_epoch) == (0, "k1", -1)
    if policy in DOWNGRADES:
        classic = h.shard.classic_group("g")
        assert classic is not None and list(classic.members) == ["c1"]
        assert h.events("group.conversion_refused") == []
    else:
        g = h.shard.consumer_group("g")
        assert g is not None and list(g.members) == ["c1"] and g.group_epoch == 11
        [event] = h.events("group.conversion_refused")
        assert event == {"group": "g", "direction": "downgrade", "reason": "policy", "policy": policy}


@pytest.mark.parametrize("policy", POLICIES)
def test_static_replacement_downgrade_follows_the_policy(policy: str) -> None:
    """A classic static member replacing the last consumer-protocol member downgrades the group
    only when the policy allows it; otherwise the joiner simply lives in the consumer group."""
    h = harness(policy)
    mixed_group(h, static=True)

    r = joined(h, h.join("", metadata=sub("foo", version=3), instance_id="i1"))

    if policy == "disabled":  # no classic member joins a consumer group then (KAFKA-20640)
        assert r.error_code == Errors.INCONSISTENT_GROUP_PROTOCOL
        assert h.events("group.conversion_refused")[0]["reason"] == "policy"
        return
    assert r.error_code == Errors.NONE and r.generation_id == 10
    if policy in DOWNGRADES:
        classic = h.shard.classic_group("g")
        assert classic is not None and set(classic.members) == {"c1", r.member_id}
    else:
        g = h.shard.consumer_group("g")
        assert g is not None and set(g.members) == {"c1", r.member_id} and g.num_classic_members == 2
        [event] = h.events("group.conversion_refused")
        assert (event["direction"], event["reason"]) == ("downgrade", "policy")


# --- the other reasons -------------------------------------------------------------------------------


def test_upgrade_refused_when_the_protocol_type_is_not_consumer() -> None:
    """A Connect (or any non-`consumer`) classic group can never become a consumer group
    (migration pitfall #12): refused with reason `protocol type`."""
    h = harness()
    classic_group(h, protocol_type="connect")

    event = assert_upgrade_refused(
        h, "protocol type", CANNOT_UPGRADE + "the group does not use the consumer embedded protocol."
    )
    assert event["protocol_type"] == "connect"


def test_upgrade_refused_when_the_group_exceeds_the_consumer_max_size() -> None:
    """More classic members than `group.consumer.max.size`: refused with reason `size`. At
    exactly the maximum the upgrade itself is allowed (the joiner is not counted), but the
    joiner then does not fit: GROUP_MAX_SIZE_REACHED, and nothing of the conversion is kept."""
    h = harness(**{"group.consumer.max.size": 2})
    classic_group(h, members=3)
    event = assert_upgrade_refused(
        h, "size", CANNOT_UPGRADE + "the group size exceeds the consumer group maximum size."
    )
    assert (event["members"], event["max_size"]) == (3, 2)

    h = harness(**{"group.consumer.max.size": 2})
    classic_group(h, members=2)
    classic = h.shard.classic_group("g")
    r = h.cgh("new", 0)
    assert r.error_code == Errors.GROUP_MAX_SIZE_REACHED
    assert h.last is not None and list(h.last.records) == [] and h.shard.classic_group("g") is classic


def test_downgrade_refused_when_the_classic_members_exceed_group_max_size() -> None:
    """A static replacement would leave more members than `group.max.size` in the classic group
    (the joiner counts): refused with reason `size`; the joiner stays in the consumer group.
    (The fence case is `test_no_conversion_when_size_exceeds_classic_max_group_size`.)"""
    h = harness(**{"group.max.size": 1})
    mixed_group(h, static=True)

    r = joined(h, h.join("", metadata=sub("foo", version=3), instance_id="i1"))

    assert r.error_code == Errors.NONE
    assert h.shard.consumer_group("g") is not None
    [event] = h.events("group.conversion_refused")
    assert (event["direction"], event["reason"], event["members"], event["max_size"]) == (
        "downgrade",
        "size",
        2,
        1,
    )


@pytest.mark.parametrize(
    ("subscription", "assigned"),
    [(b"\x00", assignment(0, foo=[1])), (sub("foo"), b"\x00\x00\x00\x00\x00\x05")],
    ids=["subscription", "assignment"],
)
def test_upgrade_refused_when_the_embedded_protocol_is_malformed(
    subscription: bytes, assigned: bytes
) -> None:
    """A member whose subscription or assignment does not parse: Kafka's "Cannot upgrade ...
    because the embedded consumer protocol is malformed." and reason `malformed embedded
    protocol`, naming the member.

    Deliberate difference: Kafka answers the classic group's parked JoinGroup/SyncGroup with
    REBALANCE_IN_PROGRESS before it parses the members, so a refused upgrade of a rebalancing
    group still sends them back to rejoin; groupshift checks everything first and leaves a
    refused group exactly as it was."""
    h = harness()
    h.seed_classic(
        5,
        [
            ClassicSeed("c0", sub("foo", version=3), assignment(3, foo=[0])),
            ClassicSeed("c1", subscription, assigned),
        ],
    )

    event = assert_upgrade_refused(
        h,
        "malformed embedded protocol",
        CANNOT_UPGRADE + "the embedded consumer protocol is malformed.",
    )
    assert event["member"] == "c1"


def test_upgrade_refused_when_a_custom_assignor_is_in_use() -> None:
    """A member's assignment carries user data: a custom client-side assignor the server cannot
    replace (KAFKA-18134): refused with Kafka's message and reason `custom assignor`."""
    h = harness()
    h.seed_classic(
        5,
        [
            ClassicSeed("c0", sub("foo", version=3), assignment(3, foo=[0])),
            ClassicSeed("c1", sub("foo", version=3), assignment(3, b"state", foo=[1])),
        ],
    )

    event = assert_upgrade_refused(
        h,
        "custom assignor",
        CANNOT_UPGRADE + "an unsupported custom assignor is in use. Please refer to the documentation "
        "or switch to a default assignor before re-attempting the upgrade.",
    )
    assert event["member"] == "c1"


def test_upgrade_accepts_empty_user_data_and_members_that_never_synced() -> None:
    """What does not refuse an upgrade: user data that is present but empty, user data in a
    subscription (only the assignment's matters), and an empty assignment from a member that
    joined but never synced, which counts as no partitions (KAFKA-17733)."""
    h = harness()
    h.seed_classic(
        5,
        [
            ClassicSeed("c0", sub("foo", version=3, user_data=b"sticky"), assignment(3, b"", foo=[0])),
            ClassicSeed("c1", sub("foo", version=3), b""),
        ],
    )

    r = h.cgh("new", 0)

    assert r.error_code == Errors.NONE
    g = h.shard.consumer_group("g")
    assert g is not None
    assert {m: dict(x.assigned_partitions) for m, x in g.members.items() if m != "new"} == {
        "c0": by_id(foo=[0]),
        "c1": {},
    }


# --- empty groups convert whatever the policy (Kafka converts empty groups whatever the policy)


@pytest.mark.parametrize("policy", POLICIES)
def test_empty_group_conversions_ignore_the_policy(policy: str) -> None:
    """Empty groups are replaced whatever the policy: a ConsumerGroupHeartbeat to an empty
    classic group, and to an offsets-only ("simple") group whose offsets stay; a classic JoinGroup
    to an empty consumer group. And classic members may join a non-empty consumer group unless the
    policy is `disabled`."""
    h = harness(policy)
    h.seed_classic(2, [], protocol=None, protocol_type="")
    assert h.cgh("k1", 0).error_code == Errors.NONE
    assert h.shard.consumer_group("g") is not None

    h = harness(policy)
    offsets = [
        CoordinatorRecord(OffsetCommitKey("g", "foo", p), OffsetCommitValue(100 + p, -1, "", h.now))
        for p in range(2)
    ]
    h._seed(offsets)
    committed = h.shard.persisted_state()["offsets"]
    assert h.shard.classic_group("g") is not None
    assert h.cgh("k1", 0).error_code == Errors.NONE
    assert h.shard.consumer_group("g") is not None
    assert h.shard.persisted_state()["offsets"] == committed

    h = harness(policy)
    h.seed_consumer_group(4, [])
    assert joined(h, h.join("", version=4)).error_code == Errors.MEMBER_ID_REQUIRED
    assert h.shard.classic_group("g") is not None

    h = harness(policy)
    h.seed_consumer_group(4, [cg_member("k1", epoch=4, topics=("foo",), client=("kip848", "/h"))])
    r = joined(h, h.join("", version=3))
    if policy == "disabled":  # Kafka 4.3 `throwIfClassicMemberCannotJoinConsumerGroup` (KAFKA-20640)
        assert r.error_code == Errors.INCONSISTENT_GROUP_PROTOCOL
        return
    assert r.error_code == Errors.NONE and r.generation_id == 5
    g = h.shard.consumer_group("g")
    assert g is not None and g.num_classic_members == 1
    assert h.events("group.conversion_refused") == []


# --- after a static replacement downgrade (KAFKA-19546) ----------------------------------------------


def test_static_replacement_downgrade_rebalances_when_the_subscription_differs() -> None:
    """KAFKA-19546: when the classic static member that replaces the last consumer-protocol
    member subscribes to something else, the classic group it lands in must rebalance (the
    members' assignments were computed for the old subscription); with the same subscription it
    stays Stable (`test_last_static_consumer_protocol_member_replaced_by_classic_protocol_member`).

    As in Kafka, the classic group is built from the consumer group as it was before this join
    (`ClassicGroup.fromConsumerGroup` runs before the join's records apply): generation 10, the
    replaced member's target, although the joiner's own subscription change bumped the epoch to
    11 and its JoinGroup is answered generation 11. Its SyncGroup at 11 is therefore
    ILLEGAL_GENERATION, and it rejoins the rebalance like the others."""
    h = harness()
    mixed_group(h, static=True)

    r = joined(h, h.join("", metadata=sub("foo", "bar", version=3), instance_id="i1", rebalance=20000))

    assert (r.error_code, r.generation_id) == (0, 11)
    classic = h.shard.classic_group("g")
    assert classic is not None and classic.is_in_state(S.PREPARING_REBALANCE)
    assert classic.generation_id == 10 and set(classic.members) == {"c1", r.member_id}
    assert MigrationHarness.assignment_partitions(classic.members[r.member_id].assignment) == {
        "foo": (3, 4, 5)
    }
    assert h.deadline("join-g") == h.now + 45000  # the largest rebalance timeout (c1's)
    assert h.deadline(f"heartbeat-g-{r.member_id}") == h.now + 10_000
    assert h.result(h.sync(r.member_id, 11)).error_code == Errors.ILLEGAL_GENERATION
    rejoin = h.join(r.member_id, metadata=sub("foo", "bar", version=3), instance_id="i1", rebalance=20000)
    assert isinstance(rejoin, Pending)  # parked until c1 rejoins too


def test_static_replacement_of_the_only_member_downgrades() -> None:
    """The replacement downgrade has no "other members" condition (Kafka's
    `validateOnlineDowngradeWithReplacedMemberId`): a consumer group whose only member is a
    consumer-protocol static member becomes a one-member classic group when a classic member
    takes over its instance id, under a policy that allows downgrades. The new classic group
    then rebalances (groupshift's rule: the joiner does not know it leads it)."""
    h = harness()
    h.seed_consumer_group(
        10,
        [
            cg_member(
                "k1", instance="i1", topics=("foo",), client=("kip848", "/h"), assigned=by_id(foo=[0, 1])
            )
        ],
        metadata=["foo"],
    )

    r = joined(h, h.join("", protocols=(Protocol("range", sub("foo", version=3)),), instance_id="i1"))

    assert (r.error_code, r.generation_id) == (0, 10)
    classic = h.shard.classic_group("g")
    assert classic is not None and list(classic.members) == [r.member_id] and classic.leader_id == r.member_id
    assert MigrationHarness.assignment_partitions(classic.members[r.member_id].assignment) == {"foo": (0, 1)}
    assert classic.is_in_state(S.PREPARING_REBALANCE)

"""Static migration on `groupshift serve`: a static classic member (`group.instance.id`) is
replaced by a static KIP-848 member with the same instance id, and back, while the other
members' partitions never move.

The cast: two dynamic kafka-python `cooperative-sticky` members and one static kafka-python
`cooperative-sticky` member (instance id `static-1`), a classic group. Cooperative members are
used for the others because an eager member revokes and re-takes everything on any rebalance;
with cooperative members "no movement" can be asserted as "no revoke or assign callback at all".

1. The static classic member closes. A static member sends no LeaveGroup (kafka-python, like
   Kafka's clients), so the group keeps its slot and its partitions, unconsumed meanwhile.
2. A confluent-kafka KIP-848 member with instance id `static-1` joins: the classic group is
   upgraded (the instance id exists in the classic group) and the joiner takes over the classic
   member's slot (Kafka `testConsumerGroupHeartbeatToClassicGroupFromExistingStaticMember`): it
   gets exactly the partitions the static classic member had.
3. The KIP-848 member closes: librdkafka's static member leaves with epoch -2 (a temporary leave:
   the group keeps its assignment for the instance id).
4. A kafka-python static member with instance id `static-1` joins: it replaces the last KIP-848
   member through JoinGroup, which downgrades the group to classic (KIP-848 "Supporting Online Consumer
   Group Upgrade",
   `testLastStaticConsumerProtocolMemberReplacedByClassicProtocolMember`); its subscription is
   the same, so there is no rebalance (KAFKA-19546), and it gets the same partitions again.
Throughout, the two dynamic members see no callback after the initial assignment.
"""

from __future__ import annotations

import time

from e2e.conftest import Gateways
from e2e.migration import Member, Scenario, describe_consumer_group, group_events, scenario, wait_until

INSTANCE = "static-1"
STATIC_SESSION_MS = 30000  # the slot must survive the hand-over gap


def takes_over(sc: Scenario, member: Member, partitions: frozenset[int], what: str) -> None:
    wait_until(
        lambda: member.owned == partitions or member.errors,
        30,
        lambda: f"{what}: {member.name} to own {sorted(partitions)}, owns {sorted(member.owned)}",
    )
    assert not member.errors, member.errors


def test_static_member_replaced_across_protocols_without_moving_others(gateways: Gateways) -> None:
    with scenario(gateways, "static") as sc:
        cast = sc.cast
        others = [cast.kafka_python("cooperative-sticky"), cast.kafka_python("cooperative-sticky")]
        static = cast.kafka_python(
            "cooperative-sticky", instance_id=INSTANCE, session_timeout_ms=STATIC_SESSION_MS
        )
        sc.step("classic", "two dynamic and one static classic member")
        slot = static.owned
        held = {m.name: m.owned for m in others}
        since = time.time()

        static.stop()  # no LeaveGroup: the slot stays
        assert not group_events(sc.gw, sc.group, "member.left")
        kip848 = cast.confluent("consumer", instance_id=INSTANCE)
        takes_over(sc, kip848, slot, "KIP-848 static member replaced the classic one")
        sc.step("consumer", "upgraded by the static replacement")
        assert sc.conversions() == [("classic", "consumer")]
        view = describe_consumer_group(sc.gw, sc.group)
        assert view.members[kip848.name].instance_id == INSTANCE
        assert view.members[kip848.name].member_type == 1
        assert {view.members[m.name].member_type for m in others} == {0}

        kip848.stop()  # librdkafka: static leave, epoch -2
        assert group_events(sc.gw, sc.group, "member.left_temporarily")
        back = cast.kafka_python(
            "cooperative-sticky", instance_id=INSTANCE, session_timeout_ms=STATIC_SESSION_MS
        )
        takes_over(sc, back, slot, "classic static member replaced the KIP-848 one")
        sc.step("classic", "downgraded by the static replacement")
        assert sc.conversions() == [("classic", "consumer"), ("consumer", "classic")]

        for m in others:
            assert m.owned == held[m.name], f"{m.name} moved: {sorted(held[m.name])} -> {sorted(m.owned)}"
            assert not sc.timeline.callbacks_of(m.name, since), (
                f"{m.name} saw callbacks {sc.timeline.callbacks_of(m.name, since)}"
            )
        report = sc.finish()
        print(f"static migration: {report}")

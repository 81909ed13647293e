"""Client-library behaviours that decide whether a live migration works, found by the migration
e2e runs and pinned here against `groupshift serve` (which answers as Kafka does in both cases).

* librdkafka's classic group leader writes each member's own *subscription* userData into that
  member's *assignment* (`rd_kafka_group_MemberState_consumer_write` writes `rkgm_userdata`).
  With `cooperative-sticky` the subscription userData is the sticky assignor's state, non-empty
  from a member's second generation on; so a classic group led by confluent-kafka
  `cooperative-sticky` members carries assignment userData, which Kafka >= 4.0 reads as a custom
  client-side assignor whose data would be lost, and refuses to upgrade (KAFKA-18134,
  GROUP_ID_NOT_FOUND "... because an unsupported custom assignor is in use"). The KIP-848 member
  gets a fatal error; the classic members are not disturbed. kafka-python's and aiokafka's leaders
  write empty userData, so their groups upgrade (the rolling tests).

* aiokafka 0.14 treats REBALANCE_IN_PROGRESS in a JoinGroup response as fatal ("Unexpected error
  in join group", the consumer's next `getmany` raises KafkaError). Kafka answers exactly that to
  every JoinGroup parked in a rebalance when the group is upgraded (KIP-848 "Supporting Online Consumer
  Group Upgrade", procedure step 1),
  so an aiokafka member that is (re)joining at the moment of the upgrade dies. kafka-python
  (like the Java client) retries and carries on as a classic member of the consumer group. To
  park the joins deterministically a raw wire member holds the classic group in
  PreparingRebalance (it never rejoins; it subscribes to another topic so that it never holds
  partitions of ours).
"""

from __future__ import annotations

import time

from e2e.conftest import Gateways
from e2e.migration import Member, coordinator_observer, group_events, list_groups, scenario, wait_until
from protocol.client import make_request
from translation.embedded_protocol import Subscription, serialize_assignment, serialize_subscription


def test_librdkafka_cooperative_sticky_leader_blocks_the_upgrade(gateways: Gateways) -> None:
    with scenario(gateways, "quirk-rdk") as sc:
        cast = sc.cast
        first = cast.confluent("classic", "cooperative-sticky")
        sc.step("classic", "one confluent-kafka cooperative-sticky member")
        classic = [first, cast.confluent("classic", "cooperative-sticky")]
        sc.step("classic", "a second one: generation 2, the first member's subscription has userData")
        since = time.time()
        joiner = cast.confluent("consumer")
        wait_until(
            lambda: joiner.reported("GROUP_ID_NOT_FOUND", "The group id does not exist"),
            30,
            lambda: f"{joiner.name} to fail with GROUP_ID_NOT_FOUND, got {joiner.client_errors}",
        )
        refused = group_events(sc.gw, sc.group, "group.conversion_refused")
        assert refused and {e["reason"] for e in refused} == {"custom assignor"}, refused
        # What the client was told, at warning level (docs/migration-guide.md).
        assert {(e["told"], e["level"]) for e in refused} == {("GROUP_ID_NOT_FOUND", "warning")}
        sc.caught_up("classic members after the refused upgrade")
        assert list_groups(sc.gw)[sc.group] == ("classic", "Stable")
        assert not joiner.owned
        for m in classic:
            assert not sc.timeline.callbacks_of(m.name, since), f"{m.name} saw a rebalance"
        joiner.stop()
        assert sc.conversions() == []
        print(f"librdkafka cooperative-sticky leader: {sc.finish()}")


def test_aiokafka_joining_during_the_upgrade_dies_where_kafka_python_carries_on(gateways: Gateways) -> None:
    with scenario(gateways, "quirk-aio") as sc:
        cast, group = sc.cast, sc.group
        protocols = [
            {
                "name": "roundrobin",
                "metadata": serialize_subscription(Subscription(0, ("not-our-topic",), None, ())),
            }
        ]
        with coordinator_observer(sc.gw, group) as wire:

            def join(member_id: str) -> object:
                return wire.request(
                    make_request(
                        11,
                        5,
                        group_id=group,
                        session_timeout=30000,
                        rebalance_timeout=30000,
                        member_id=member_id,
                        group_instance_id=None,
                        protocol_type="consumer",
                        protocols=protocols,
                    )
                )

            first = join("")
            assert first.error_code == 79  # MEMBER_ID_REQUIRED
            joined = join(first.member_id)
            assert joined.error_code == 0 and joined.leader == first.member_id
            synced = wire.request(
                make_request(
                    14,
                    3,
                    group_id=group,
                    generation_id=joined.generation_id,
                    member_id=first.member_id,
                    group_instance_id=None,
                    assignments=[{"member_id": first.member_id, "assignment": serialize_assignment([], 0)}],
                )
            )
            assert synced.error_code == 0
            # The raw member never rejoins: the next rebalance waits for it (30 s rebalance timeout).

            aio = cast.aiokafka("roundrobin")
            kp = cast.kafka_python("roundrobin")

            def parked(m: Member) -> bool:
                return any(
                    e["member"].startswith(f"{m.name}-") for e in group_events(sc.gw, group, "member.joined")
                )

            wait_until(lambda: parked(aio) and parked(kp), 20, "both client members' JoinGroups to be parked")
            assert list_groups(sc.gw)[group] == ("classic", "PreparingRebalance")

            kip848 = cast.confluent("consumer")
            wait_until(lambda: aio.errors, 20, f"{aio.name} to fail")
            assert "RebalanceInProgressError" in aio.errors[0], aio.errors
            assert sc.conversions() == [("classic", "consumer")]
            wait_until(
                lambda: kp.owned and kip848.owned,
                30,
                "the kafka-python and KIP-848 members to consume in the consumer group",
            )

            left = wire.request(
                make_request(
                    13, 3, group_id=group, members=[{"member_id": first.member_id, "group_instance_id": None}]
                )
            )
            assert left.error_code == 0
        aio.errors.clear()  # the quirk being pinned; the dead member is simply gone
        sc.step("consumer", "kafka-python and KIP-848 members after the upgrade")
        print(f"aiokafka join during upgrade: {sc.finish()}")

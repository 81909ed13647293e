"""`group.consumer.migration.policy` on a live `groupshift serve` (Kafka
`ConsumerGroupMigrationPolicy`, KIP-848 "Supporting Online Consumer Group Upgrade"): `disabled`, `upgrade`
and `downgrade`, each with
real clients and a continuous producer. (`bidirectional`, the default, is what the rolling and
mixed tests run.)

A refused upgrade is Kafka 4.3's GROUP_ID_NOT_FOUND "Cannot upgrade classic group X to consumer
group because ..." to the KIP-848 member's ConsumerGroupHeartbeat; librdkafka surfaces it through the
consumer's error callback as a *fatal* error (`_FATAL`, "Broker: The group id does not exist:
ConsumerGroupHeartbeat fatal error"): the consumer is unusable from then on and never gets
partitions. The gateway
also logs `group.conversion_refused` with the reason. The classic members must not notice: no
rebalance (no callback at all), the classic group's generation unchanged, consumption going on.
"""

from __future__ import annotations

import time

from e2e.conftest import Gateways
from e2e.migration import Member, Scenario, group_events, list_groups, scenario, wait_until


def refused_upgrade(sc: Scenario, classic: list[Member]) -> None:
    """A KIP-848 member tries to join the non-empty classic group and is refused; the classic
    members are undisturbed."""
    since = time.time()
    generations = [e["generation"] for e in group_events(sc.gw, sc.group, "group.generation_started")]
    joiner = sc.cast.confluent("consumer")
    # librdkafka 2.16 makes it fatal: "_FATAL ... Broker: The group id does not exist:
    # ConsumerGroupHeartbeat fatal error".
    wait_until(
        lambda: joiner.reported("GROUP_ID_NOT_FOUND", "The group id does not exist"),
        30,
        lambda: f"{joiner.name} to report GROUP_ID_NOT_FOUND, got {joiner.client_errors}",
    )
    refusals = [
        e for e in group_events(sc.gw, sc.group, "group.conversion_refused") if e["direction"] == "upgrade"
    ]
    assert refusals and refusals[-1]["reason"] == "policy", refusals
    # The classic members keep consuming through all of this, without a rebalance.
    sc.caught_up("classic members after a refused upgrade")
    assert not joiner.owned
    assert list_groups(sc.gw)[sc.group] == ("classic", "Stable")
    assert [e["generation"] for e in group_events(sc.gw, sc.group, "group.generation_started")] == generations
    for m in classic:
        assert not sc.timeline.callbacks_of(m.name, since), f"{m.name} saw a rebalance"
    joiner.stop()
    sc.step("classic", "the refused member closed")
    for m in classic:
        assert not sc.timeline.callbacks_of(m.name, since), f"{m.name} saw a rebalance"


def test_disabled_refuses_the_upgrade_and_leaves_classic_members_alone(gateways: Gateways) -> None:
    with scenario(gateways, "pol-disabled", sets=["group.consumer.migration.policy=disabled"]) as sc:
        classic = [sc.cast.kafka_python("range") for _ in range(3)]
        sc.step("classic", "three classic members")
        refused_upgrade(sc, classic)
        assert sc.conversions() == []
        print(f"policy disabled: {sc.finish()}")


def test_upgrade_policy_keeps_the_consumer_group_when_the_last_kip848_member_leaves(
    gateways: Gateways,
) -> None:
    with scenario(gateways, "pol-upgrade", sets=["group.consumer.migration.policy=upgrade"]) as sc:
        classic = [sc.cast.kafka_python("range") for _ in range(2)]
        sc.step("classic", "two classic members")
        kip848 = sc.cast.confluent("consumer")
        sc.step("consumer", "a KIP-848 member joined: upgraded")
        kip848.stop()
        sc.step("consumer", "the last KIP-848 member left: still a consumer group")
        refusals = [
            e
            for e in group_events(sc.gw, sc.group, "group.conversion_refused")
            if e["direction"] == "downgrade"
        ]
        assert refusals and refusals[-1]["reason"] == "policy", refusals
        assert sc.conversions() == [("classic", "consumer")]
        # The classic members go on living in the consumer group, and a new one can join it.
        classic.append(sc.cast.kafka_python("range"))
        sc.step("consumer", "a classic member joined the consumer group")
        print(f"policy upgrade: {sc.finish()}")


def test_downgrade_policy_refuses_upgrades_but_downgrades(gateways: Gateways) -> None:
    with scenario(gateways, "pol-downgrade", sets=["group.consumer.migration.policy=downgrade"]) as sc:
        # A consumer group can only come from an empty group here; classic members may join it
        # whatever the policy.
        kip848 = sc.cast.confluent("consumer")
        sc.step("consumer", "a KIP-848 member created a consumer group")
        classic = [sc.cast.kafka_python("range") for _ in range(2)]
        sc.step("consumer", "two classic members joined the consumer group")
        kip848.stop()
        sc.step("classic", "the last KIP-848 member left: downgraded")
        assert sc.conversions() == [("consumer", "classic")]
        refused_upgrade(sc, classic)
        assert sc.conversions() == [("consumer", "classic")]
        print(f"policy downgrade: {sc.finish()}")

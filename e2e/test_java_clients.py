"""Kafka's own Java consumer (kafka-clients 4.x through `VerifiableConsumer`) in live groups on
`groupshift serve`, with a producer writing continuously to a 12-partition topic.

- `group.protocol=consumer` (KIP-848's reference client, AsyncKafkaConsumer) with the server-side
  `uniform` and `range` assignors (`group.remote.assignor`), members joining and leaving
  mid-stream;
- `group.protocol=classic` (ClassicKafkaConsumer, eager `RangeAssignor`) likewise;
- static members (`group.instance.id`): a KIP-848 static member that restarts gets its
  partitions back without the others moving;
- the live rolling upgrade then downgrade with Java members on both sides and Python members
  (kafka-python classic, confluent-kafka `group.protocol=consumer`) mixed in;
- `group.consumer.migration.policy=disabled`: a Java KIP-848 member joining a classic group is
  refused (GROUP_ID_NOT_FOUND, fatal for the Java client: the tool exits) and the classic
  members do not notice.

Every scenario ends with e2e/migration.py's checkers: no partition owned twice at once, every
acknowledged record consumed (with its value), duplicates only after hand-overs, commits
advancing to the log end. VerifiableConsumer has no pattern subscription (it calls
`subscribe(List.of(topic))`), so regex subscriptions are not covered with Java here.
"""

from __future__ import annotations

import time

import pytest

from e2e.conftest import Gateways
from e2e.java import JavaMember, add_java
from e2e.migration import describe_consumer_group, group_events, list_groups, scenario, wait_until
from harness.kafka_dist.java_clients import JavaClients


@pytest.mark.parametrize("remote_assignor", ["uniform", "range"])
def test_java_consumer_protocol_members_join_and_leave(
    shared_gateways: Gateways, kafka_clients4: JavaClients, remote_assignor: str
) -> None:
    with scenario(shared_gateways, f"java-848-{remote_assignor}") as sc:
        a = add_java(sc.cast, kafka_clients4, "consumer", remote_assignor)
        b = add_java(sc.cast, kafka_clients4, "consumer", remote_assignor)
        sc.step("consumer", "two Java KIP-848 members")
        c = add_java(sc.cast, kafka_clients4, "consumer", remote_assignor)
        sc.step("consumer", f"{c.name} joined mid-stream")
        view = describe_consumer_group(sc.gw, sc.group)
        assert {m.member_type for m in view.members.values()} == {1}, view
        assert all(m.member_epoch == view.group_epoch for m in view.members.values()), view
        a.stop()
        sc.step("consumer", f"{a.name} left mid-stream")
        assert sorted(len(m.owned) for m in (b, c)) == [6, 6]
        report = sc.finish()
        print(f"java consumer/{remote_assignor}: {report}")
        assert report.handovers >= 4


def test_java_classic_members_join_and_leave(shared_gateways: Gateways, kafka_clients4: JavaClients) -> None:
    with scenario(shared_gateways, "java-classic") as sc:
        a = add_java(sc.cast, kafka_clients4, "classic")
        add_java(sc.cast, kafka_clients4, "classic")
        sc.step("classic", "two Java classic members")
        add_java(sc.cast, kafka_clients4, "classic")
        sc.step("classic", "a third joined mid-stream")
        a.stop()
        sc.step("classic", f"{a.name} left mid-stream")
        assert sc.conversions() == []
        report = sc.finish()
        print(f"java classic/range: {report}")
        assert report.handovers >= 4


def test_java_static_member_restarts_into_its_partitions(
    shared_gateways: Gateways, kafka_clients4: JavaClients
) -> None:
    with scenario(shared_gateways, "java-static") as sc:
        # The gone member's session must outlast a JVM start on a loaded machine (the scenario's
        # servers default to 6 s; a restart there took longer once and its partitions moved):
        # the group's own session timeout, a KIP-848 GROUP config, as an operator would set it.
        _set_group_session_timeout(sc.gw.bootstrap, sc.group, 30000)
        members = [add_java(sc.cast, kafka_clients4, "consumer", instance_id=f"inst-{i}") for i in range(3)]
        sc.step("consumer", "three static Java members")
        view = describe_consumer_group(sc.gw, sc.group)
        assert {m.instance_id for m in view.members.values()} == {"inst-0", "inst-1", "inst-2"}, view
        gone = members[0]
        before = gone.owned
        others = {m.name: m.owned for m in members[1:]}
        since = time.time()
        gone.stop()
        back = add_java(sc.cast, kafka_clients4, "consumer", instance_id="inst-0")
        sc.step("consumer", "the static member came back")
        assert back.owned == before, (back.owned, before)
        for m in members[1:]:
            assert m.owned == others[m.name]
            assert not sc.timeline.callbacks_of(m.name, since), f"{m.name} was rebalanced"
        report = sc.finish()
        print(f"java static: {report}")


def _set_group_session_timeout(bootstrap: str, group: str, ms: int) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    entry = ConfigEntry("consumer.session.timeout.ms", str(ms), incremental_operation=AlterConfigOpType.SET)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])]
    ).values()
    future.result(15)


def test_java_and_python_rolling_upgrade_then_downgrade(
    shared_gateways: Gateways, kafka_clients4: JavaClients
) -> None:
    with scenario(shared_gateways, "java-roll") as sc:
        cast = sc.cast
        classic = [
            add_java(cast, kafka_clients4, "classic"),
            cast.kafka_python("range"),
            add_java(cast, kafka_clients4, "classic"),
            cast.kafka_python("range"),
        ]
        sc.step("classic", "two Java and two kafka-python classic members")
        upgraded = []
        for i, old in enumerate(classic):
            new = add_java(cast, kafka_clients4, "consumer") if i % 2 == 0 else cast.confluent("consumer")
            upgraded.append(new)
            sc.step("consumer", f"upgrade {i + 1}/4: {new.name} joined")
            old.stop()
            sc.step("consumer", f"upgrade {i + 1}/4: {old.name} left")
        assert sc.conversions() == [("classic", "consumer")]
        for i, old in enumerate(upgraded):
            new = add_java(cast, kafka_clients4, "classic") if i % 2 == 0 else cast.kafka_python("range")
            sc.step("consumer", f"downgrade {i + 1}/4: {new.name} joined")
            old.stop()
            sc.step("classic" if i == 3 else "consumer", f"downgrade {i + 1}/4: {old.name} left")
        assert sc.conversions() == [("classic", "consumer"), ("consumer", "classic")]
        report = sc.finish()
        print(f"java + python rolling: {report}")
        assert report.handovers >= 16


def test_java_upgrade_refused_under_disabled_policy(gateways: Gateways, kafka_clients4: JavaClients) -> None:
    with scenario(gateways, "java-pol", sets=["group.consumer.migration.policy=disabled"]) as sc:
        classic = [add_java(sc.cast, kafka_clients4, "classic") for _ in range(2)]
        sc.step("classic", "two Java classic members")
        generations = [e["generation"] for e in group_events(sc.gw, sc.group, "group.generation_started")]
        since = time.time()
        joiner = add_java(sc.cast, kafka_clients4, "consumer")
        # GROUP_ID_NOT_FOUND is fatal for AsyncKafkaConsumer: the tool logs it and exits.
        wait_until(joiner.stopped.is_set, 30, f"{joiner.name} to give up")
        assert isinstance(joiner, JavaMember) and joiner.proc is not None
        stderr = joiner.errors_text()
        assert "GroupIdNotFoundException" in stderr and "online upgrade is disabled" in stderr, stderr
        refusals = group_events(sc.gw, sc.group, "group.conversion_refused")
        assert refusals and refusals[-1]["reason"] == "policy", refusals
        assert not joiner.owned
        sc.caught_up("classic members after a refused upgrade")
        assert list_groups(sc.gw)[sc.group] == ("classic", "Stable")
        assert [
            e["generation"] for e in group_events(sc.gw, sc.group, "group.generation_started")
        ] == generations
        for m in classic:
            assert not sc.timeline.callbacks_of(m.name, since), f"{m.name} saw a rebalance"
        joiner.errors.clear()  # its early exit is the expected outcome
        print(f"java policy disabled: {sc.finish()}")

"""confluent-kafka 2.16.1 (librdkafka 2.16) consumer groups: classic groups with `range` and
`cooperative-sticky`, and KIP-848 consumer-protocol groups (ConsumerGroupHeartbeat) with the
server assignors `uniform` and `range`, a regex subscription, and static members. Each runs the
common story: three members, one leaving and one joining mid-stream, every record consumed, the
end offsets committed, the partitions split exactly among the live members.
"""

from __future__ import annotations

import pytest

from e2e.conftest import Gateways
from e2e.groups import (
    FAST_GROUP_SETTINGS,
    ConfluentMember,
    Ledger,
    create_topic,
    run_group_scenario,
)


def consumer_group_events(gw, group: str, name: str) -> list[dict]:
    return [e for e in gw.events(name) if e.get("group") == group]


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_confluent_classic_group(shared_gateways: Gateways, strategy: str) -> None:
    gw = shared_gateways.start("ck-classic", sets=FAST_GROUP_SETTINGS)
    topic, group = f"ck-classic-{strategy}", f"ck-classic-group-{strategy}"
    create_topic(gw, topic)

    def member(name: str, ledger: Ledger) -> ConfluentMember:
        return ConfluentMember(
            name, ledger, gw.bootstrap, group, **{"partition.assignment.strategy": strategy}
        )

    result = run_group_scenario(gw, topic, group, member)
    generations = consumer_group_events(gw, group, "group.generation_started")
    assert {e["protocol"] for e in generations} - {None} == {strategy}
    assert consumer_group_events(gw, group, "group.epoch_bumped") == []
    if strategy == "cooperative-sticky":
        # incremental: the members that stay never give back what they keep
        for name in ("m2", "m3"):
            revoked = [ps for kind, ps in result.ledger.callbacks_of(name) if kind == "revoked"]
            kept = result.first[name] & result.second[name]
            assert not any(kept & ps for ps in revoked[:-1]), (name, revoked)


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_confluent_consumer_protocol_group(shared_gateways: Gateways, assignor: str) -> None:
    gw = shared_gateways.start("ck-consumer", sets=FAST_GROUP_SETTINGS)
    topic, group = f"ck-consumer-{assignor}", f"ck-consumer-group-{assignor}"
    create_topic(gw, topic)

    def member(name: str, ledger: Ledger) -> ConfluentMember:
        return ConfluentMember(
            name,
            ledger,
            gw.bootstrap,
            group,
            **{"group.protocol": "consumer", "group.remote.assignor": assignor},
        )

    result = run_group_scenario(gw, topic, group, member)
    assert consumer_group_events(gw, group, "group.generation_started") == []
    computed = consumer_group_events(gw, group, "group.target_assignment_computed")
    assert computed and {e.get("assignor") for e in computed} == {assignor}
    if assignor == "range":
        assert sorted(map(sorted, result.second.values())) == [[0, 1], [2, 3], [4, 5]]
    # the leaver left with epoch -1 (a clean leave, `member.left`), nobody's session expired
    left = [e.get("reason") for e in consumer_group_events(gw, group, "member.left")]
    assert "the member left the group." in left
    fenced = [e.get("reason") for e in consumer_group_events(gw, group, "member.fenced")]
    assert not [r for r in fenced if "session" in str(r)], fenced


def test_confluent_consumer_protocol_regex_subscription(shared_gateways: Gateways) -> None:
    gw = shared_gateways.start("ck-regex", sets=FAST_GROUP_SETTINGS)
    topic, group = "e2e-regex-orders", "ck-regex-group"
    create_topic(gw, topic)
    create_topic(gw, "not-e2e-regex-orders", 2)  # must not match ^e2e-regex-.*
    members: list[ConfluentMember] = []

    def member(name: str, ledger: Ledger) -> ConfluentMember:
        m = ConfluentMember(
            name,
            ledger,
            gw.bootstrap,
            group,
            subscription=["^e2e-regex-.*"],
            **{"group.protocol": "consumer"},
        )
        members.append(m)
        return m

    run_group_scenario(gw, topic, group, member)
    for m in members:
        assert m.all_topics <= {topic}, m.all_topics
    resolved = consumer_group_events(gw, group, "group.regex_resolved")
    assert resolved, "the gateway never resolved the regex"
    assert all(set(e.get("topics", [])) <= {topic} for e in resolved), resolved


def test_confluent_consumer_protocol_static_members(gateways: Gateways) -> None:
    # A static member that leaves (epoch -2) keeps its partitions until its session times out.
    sets = [*FAST_GROUP_SETTINGS, "group.consumer.session.timeout.ms=3000"]
    gw = gateways.start("ck-static", sets=sets)
    topic, group = "ck-static", "ck-static-group"
    create_topic(gw, topic)

    def member(name: str, ledger: Ledger) -> ConfluentMember:
        return ConfluentMember(
            name,
            ledger,
            gw.bootstrap,
            group,
            **{"group.protocol": "consumer", "group.instance.id": f"static-{name}"},
        )

    run_group_scenario(gw, topic, group, member)
    left = {
        e["member"]: e.get("instance_id") for e in consumer_group_events(gw, group, "member.left_temporarily")
    }
    assert "static-m1" in left.values(), left
    # m1 left with epoch -2 and kept its partitions until its session expired
    m1 = [mid for mid, iid in left.items() if iid == "static-m1"]
    expired = [e for e in consumer_group_events(gw, group, "member.fenced") if e.get("member") in m1]
    assert [e.get("reason") for e in expired] == ["the member session expired."], expired

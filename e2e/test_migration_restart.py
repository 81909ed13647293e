"""Restart mid-migration: the gateway is SIGKILLed while the group is mixed (classic members
living inside a consumer group), restarted on the same data directory and port, and the
migration then completes, with a producer writing throughout.

Both directions:
* `test_restart_then_downgrade`: 2 kafka-python eager members and 2 KIP-848 members; kill;
  restart; all four resume (same members, no re-join from scratch needed); the KIP-848 members
  leave and the group becomes classic.
* `test_restart_then_upgrade`: 2 classic members and 2 KIP-848 members; kill; restart; the classic
  members are replaced one at a time by KIP-848 members and the group stays `consumer` with no
  classic member left (a classic member leaving never downgrades).

No acknowledged record is lost (every one is consumed), and the ownership / duplicate / commit
checks hold across the crash. Members whose session the gateway expired while it was down (it
must not: the restarted gateway re-arms session timers from its load time) would show as
`member.fenced` events; their windows end at the fence (see e2e/migration.py).
"""

from __future__ import annotations

from e2e.conftest import Gateways
from e2e.migration import Scenario, describe_consumer_group, restart_same_port, scenario


def crash_and_restart(gateways: Gateways, sc: Scenario) -> None:
    before = describe_consumer_group(sc.gw, sc.group)
    sc.gw.kill()
    sc.gw = restart_same_port(gateways, sc.gw)
    sc.cast.gw = sc.gw
    sc.step("consumer", "all members resumed after the restart")
    after = describe_consumer_group(sc.gw, sc.group)
    # The same members, by member id, carried over the crash.
    assert {m.member_id for m in after.members.values()} == {m.member_id for m in before.members.values()}
    assert not [e for e in sc.gw.events("member.fenced") if e.get("group") == sc.group]


def test_restart_then_downgrade(gateways: Gateways) -> None:
    with scenario(gateways, "restart-down") as sc:
        cast = sc.cast
        classic = [cast.kafka_python("range"), cast.kafka_python("range")]
        sc.step("classic", "two classic members")
        kip848 = [cast.confluent("consumer"), cast.confluent("consumer")]
        sc.step("consumer", "two KIP-848 members joined: mixed")
        crash_and_restart(gateways, sc)
        kip848[0].stop()
        sc.step("consumer", "one KIP-848 member left")
        kip848[1].stop()
        sc.step("classic", "the last KIP-848 member left: downgraded after the restart")
        assert sc.conversions() == [("classic", "consumer"), ("consumer", "classic")]
        assert all(m.live for m in classic)
        print(f"restart then downgrade: {sc.finish()}")


def test_restart_then_upgrade(gateways: Gateways) -> None:
    with scenario(gateways, "restart-up") as sc:
        cast = sc.cast
        classic = [cast.kafka_python("cooperative-sticky"), cast.kafka_python("cooperative-sticky")]
        sc.step("classic", "two classic members")
        kip848 = [cast.confluent("consumer"), cast.confluent("consumer")]
        sc.step("consumer", "two KIP-848 members joined: mixed")
        crash_and_restart(gateways, sc)
        for old in classic:
            kip848.append(cast.confluent("consumer"))
            sc.step("consumer", f"{kip848[-1].name} joined")
            old.stop()
            sc.step("consumer", f"{old.name} left")
        view = describe_consumer_group(sc.gw, sc.group)
        assert {m.member_type for m in view.members.values()} == {1}
        assert sc.conversions() == [("classic", "consumer")]
        print(f"restart then upgrade: {sc.finish()}")

"""Killed members in a migrating group: a member process is SIGKILLed (no leave, no callback),
the gateway fences it when its session expires, and the group carries on. This is where the
ownership rule's fence clause (e2e/migration.py) is exercised for real: the killed member's
ownership windows end at the gateway's `member.fenced` event, and only then may its partitions
go to someone else.

* The last KIP-848 member of a consumer group with classic members dies: its session
  (`group.consumer.session.timeout.ms`) expires, the fence downgrades the group to classic (spec
  KIP-848 downgrade trigger, Kafka `testLastConsumerProtocolMemberSessionTimeoutInConsumerGroup`) and the
  classic members rebalance over all partitions.
* A classic member living in a consumer group dies: it is fenced after its own (classic) session
  timeout, the group stays a consumer group (a classic member never triggers a downgrade) and the
  KIP-848 members take its partitions over.
"""

from __future__ import annotations

from e2e.conftest import Gateways
from e2e.migration import Scenario, group_events, ownership_windows, scenario, server_time

KILLED_CLASSIC_SESSION_MS = 3000


def fenced_window_ends(sc: Scenario, name: str, member_id: str, reason: str) -> float:
    """The gateway fenced `member_id` for `reason`; the member's windows end exactly then."""
    fenced = [e for e in group_events(sc.gw, sc.group, "member.fenced") if e["member"] == member_id]
    assert [e["reason"] for e in fenced] == [reason], fenced
    at = server_time(fenced[0])
    windows = ownership_windows(sc.timeline, [(at, member_id)])
    ends = [w.end for ws in windows.values() for w in ws if w.member == name]
    assert ends and max(ends) == at, (ends, at)
    return at


def test_killed_last_kip848_member_downgrades_on_session_timeout(gateways: Gateways) -> None:
    with scenario(gateways, "kill-kip848") as sc:
        cast = sc.cast
        classic = [cast.kafka_python("range"), cast.kafka_python("range")]
        sc.step("classic", "two classic members")
        victim = cast.remote("confluent", protocol="consumer")
        sc.step("consumer", "a KIP-848 member in its own process joined")
        member_id = victim.member_id
        assert victim.owned

        victim.kill()
        sc.step("classic", "the killed KIP-848 member was fenced: downgraded")
        assert sc.conversions() == [("classic", "consumer"), ("consumer", "classic")]
        converted = group_events(sc.gw, sc.group, "group.converted")[-1]
        assert "session expired" in converted["reason"], converted
        at = fenced_window_ends(sc, victim.name, member_id, "the member session expired.")
        assert at - victim.killed_at >= 5.0  # the 6 s consumer session, not earlier
        assert all(m.live for m in classic)
        print(f"killed KIP-848 member: {sc.finish()}")


def test_killed_classic_member_in_consumer_group_is_fenced(gateways: Gateways) -> None:
    with scenario(gateways, "kill-classic") as sc:
        cast = sc.cast
        victim = cast.remote("kafka-python", assignor="range", session_timeout_ms=KILLED_CLASSIC_SESSION_MS)
        sc.step("classic", "a classic member in its own process")
        kip848 = [cast.confluent("consumer"), cast.confluent("consumer")]
        sc.step("consumer", "two KIP-848 members joined")
        member_id = victim.member_id
        assert victim.owned

        victim.kill()
        sc.step("consumer", "the killed classic member was fenced; still a consumer group")
        at = fenced_window_ends(sc, victim.name, member_id, "the member session expired.")
        assert at - victim.killed_at >= KILLED_CLASSIC_SESSION_MS / 1000 - 0.5
        assert sc.conversions() == [("classic", "consumer")]
        assert all(m.live for m in kip848)
        print(f"killed classic member: {sc.finish()}")

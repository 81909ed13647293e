"""Session and rebalance timeouts (KIP-848 session and rebalance timeouts) and the timer structure itself."""

from __future__ import annotations

from engine.consumer.member import MemberState
from engine.timers import Timers
from tests.consumer_harness import Harness


def test_session_timeout_fences_a_silent_member_and_bumps_the_epoch() -> None:
    h = Harness()
    h.join("m1")
    h.join("m2")
    h.advance(40_000)
    h.hb(member_id="m2", member_epoch=h.member("m2").member_epoch)
    outs = h.advance(5_001)
    assert len(outs) == 1
    types = [f"k{r.key.RECORD_TYPE}{'-' if r.value is None else ''}" for r in outs[0].records]
    assert types == ["k8-", "k7-", "k5-", "k3"]
    ((name, fields),) = outs[0].events
    assert name == "member.fenced" and fields["member"] == "m1"
    assert fields["reason"] == "the member session expired."
    assert set(h.group.members) == {"m2"}


def test_heartbeat_pushes_the_session_deadline() -> None:
    h = Harness()
    h.join("m1")
    first = h.shard.timers.deadline("session-timeout-g-m1")
    h.advance(10_000)
    h.hb(member_id="m1", member_epoch=2)
    assert h.shard.timers.deadline("session-timeout-g-m1") == h.now + 45_000
    assert first is not None and h.shard.timers.deadline("session-timeout-g-m1") > first


def test_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    h = Harness()
    h.join("m1", rebalance_timeout_ms=5_000)
    h.join("m2")
    h.hb(member_id="m1", member_epoch=2)  # asked to revoke, never acknowledges
    assert h.member("m1").state is MemberState.UNREVOKED_PARTITIONS
    assert h.shard.timers.is_scheduled("rebalance-timeout-g-m1")
    h.hb(member_id="m1", member_epoch=2)  # still owns them (owned not reported)
    outs = h.advance(5_001)
    assert [f["reason"] for o in outs for n, f in o.events if n == "member.fenced"] == [
        "it failed to transition from epoch 2 within 5000ms."
    ]
    assert "m1" not in h.group.members


def test_rebalance_timer_is_cancelled_once_the_revocation_is_acknowledged() -> None:
    h = Harness()
    h.join("m1", rebalance_timeout_ms=5_000)
    h.join("m2")
    r = h.hb(member_id="m1", member_epoch=2)
    h.ack("m1", r)
    assert h.member("m1").state is MemberState.STABLE
    assert not h.shard.timers.is_scheduled("rebalance-timeout-g-m1")
    assert h.advance(6_000) == []


def test_fencing_cancels_all_of_the_members_timers() -> None:
    h = Harness()
    h.join("m1", rebalance_timeout_ms=5_000)
    h.join("m2")
    h.hb(member_id="m1", member_epoch=2)
    h.hb(member_id="m1", member_epoch=-1)
    assert not any(k.endswith("-m1") for k in h.timer_keys())


def test_timers_fire_in_deadline_order_and_reschedule_replaces() -> None:
    t = Timers()
    fired: list[str] = []
    t.schedule("a", 100, 0, lambda now: fired.append("a"))
    t.schedule("b", 50, 0, lambda now: fired.append("b"))
    t.schedule("c", 100, 10, lambda now: fired.append("c"))
    t.schedule("a", 100, 20, lambda now: fired.append("a2"))  # replaces a
    assert t.next_deadline() == 50
    while (e := t.pop_due(200)) is not None:
        e.callback(200)
    assert fired == ["b", "c", "a2"]
    assert len(t) == 0 and t.next_deadline() is None


def test_timer_reschedule_is_ignored_for_missing_keys_and_cancel_is_idempotent() -> None:
    t = Timers()
    assert t.reschedule("x", 10, 0) is False
    t.schedule_if_absent("x", 10, 0, lambda now: None)
    t.schedule_if_absent("x", 99, 0, lambda now: None)
    assert t.deadline("x") == 10
    t.cancel("x")
    t.cancel("x")
    assert not t.is_scheduled("x")


def test_timers_never_run_backwards_in_time() -> None:
    t = Timers()
    t.schedule("a", 100, 1000, lambda now: None)
    t.schedule("b", 100, 500, lambda now: None)  # a clock going backwards is clamped
    assert t.deadline("b") == 1100
    assert t.pop_due(1099) is None

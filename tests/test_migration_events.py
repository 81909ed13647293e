"""The events that tell a migration's story, as the engine returns them (data in `Outcome.events`)
and as the gateway completes them (`gateway.groups.events`) and counts them
(`gateway.groups.group_metrics`), without a server: a shard with the translation layer installed.

* a leave the member asked for is `member.left`; `member.fenced` is only a removal the coordinator
  decided (session expiry), with its reason;
* `member.assignment_changed` names the partitions added, newly revoked, still pending revocation
  and still pending assignment (the KIP-848 case study "Basic" in numbers);
* `member.joined` gains the client id, host, protocol and assignor; a refused conversion gains
  the error the client was told; steady heartbeats produce no event at all;
* per-group metrics count members by protocol through an upgrade and respect their cap.
"""

from __future__ import annotations

from typing import Any

from engine.classic.member import Protocol
from engine.errors import Errors
from engine.outcome import Outcome
from gateway.groups.events import WARNING_EVENTS, ClassicAssignments, annotate
from gateway.groups.group_metrics import GroupMetrics
from gateway.metrics import MetricsRegistry
from tests.migration_harness import MigrationHarness, sub
from translation.embedded_protocol import serialize_assignment


def events(out: Outcome[Any] | None, name: str) -> list[dict[str, Any]]:
    assert out is not None
    return [f for n, f in out.events if n == name]


def test_a_leave_is_member_left_and_an_expiry_is_member_fenced() -> None:
    h = MigrationHarness()
    h.cgh("a", 0)
    r = h.cgh("b", 0)
    h.cgh("b", -1)
    assert events(h.last, "member.fenced") == []
    [left] = events(h.last, "member.left")
    assert (left["member"], left["reason"], left["member_epoch"]) == (
        "b",
        "the member left the group.",
        r.member_epoch,
    )
    outs = h.advance(45_001)
    fenced = [f for o in outs for n, f in o.events if n == "member.fenced"]
    assert [(f["member"], f["reason"]) for f in fenced] == [("a", "the member session expired.")]
    assert [n for o in outs for n, _ in o.events if n == "member.left"] == []


def test_assignment_changed_names_added_revoked_and_pending_partitions() -> None:
    h = MigrationHarness(topics={"foo": 2})
    a = h.cgh("a", 0)
    [first] = events(h.last, "member.assignment_changed")
    assert first["added"] == ["foo-0", "foo-1"] and first["revoked"] == []
    a = h.ack("a", a)
    h.cgh("b", 0)  # b's target takes one of a's partitions: b waits for it
    [b_change] = events(h.last, "member.assignment_changed")
    assert b_change["member"] == "b" and b_change["added"] == []
    assert b_change["state"] == "UNRELEASED_PARTITIONS" and len(b_change["pending_assignment"]) == 1
    moving = b_change["pending_assignment"][0]
    h.cgh("a", a.member_epoch)  # a is asked to revoke it
    [a_change] = events(h.last, "member.assignment_changed")
    assert a_change["revoked"] == [moving] and a_change["pending_revocation"] == [moving]
    assert a_change["state"] == "UNREVOKED_PARTITIONS"
    assert a_change["target_epoch"] == b_change["target_epoch"] > a_change["member_epoch"]


def test_steady_heartbeats_produce_no_events() -> None:
    h = MigrationHarness()
    r = h.cgh("a", 0)
    r = h.ack("a", r)
    for _ in range(3):
        r = h.cgh("a", r.member_epoch)
        assert h.last is not None and list(h.last.events) == [] and list(h.last.records) == []


def test_consumer_joined_event_names_client_host_protocol_and_assignor() -> None:
    h = MigrationHarness()
    h.cgh("k", 0, assignor="range")
    h.cgh("k2", 0)
    assert h.last is not None
    annotate(h.shard, h.last.events)
    [k2] = events(h.last, "member.joined")
    assert (k2["client_id"], k2["client_host"], k2["protocol"]) == ("kip848", "/h", "consumer")
    assert k2["assignor"] == "uniform"  # none asked for: the group's default


def test_classic_joined_event_names_the_offered_assignors() -> None:
    h = MigrationHarness()
    protocols = (Protocol("range", sub("foo")), Protocol("roundrobin", sub("foo")))
    first = h.join("", protocols=protocols)  # JoinGroup v5: MEMBER_ID_REQUIRED, then the real join
    h.join(first.member_id, protocols=protocols)
    assert h.last is not None
    annotate(h.shard, h.last.events)
    [j] = events(h.last, "member.joined")
    assert (j["client_id"], j["client_host"], j["protocol"]) == ("classic", "/h", "classic")
    assert j["assignor"] == ["range", "roundrobin"]


def test_refused_upgrade_says_what_the_client_was_told_at_warning_level() -> None:
    h = MigrationHarness(**{"group_consumer_migration_policy": "downgrade"})
    h.seed_classic_group(3, {"c1": [0, 1, 2, 3, 4, 5]}, session=600_000)
    r = h.cgh("k1", 0)
    assert r.error_code == Errors.GROUP_ID_NOT_FOUND
    assert h.last is not None
    annotate(h.shard, h.last.events)
    [refused] = events(h.last, "group.conversion_refused")
    assert (refused["reason"], refused["told"]) == ("policy", "GROUP_ID_NOT_FOUND")
    assert "group.conversion_refused" in WARNING_EVENTS and "group.converted" in WARNING_EVENTS


def test_group_metrics_count_members_by_protocol_through_an_upgrade_and_cap_groups() -> None:
    h = MigrationHarness()
    clock = [1000.0]

    def groups() -> Any:
        for gid, g in h.shard.groups.items():
            yield gid, g, h.shard.offsets.group(gid)

    registry = MetricsRegistry()
    gm = GroupMetrics(
        registry, groups, h.shard.groups.get, lambda t, p: 10, max_groups=1, clock=lambda: clock[0]
    )
    h.seed_classic_group(3, {"c1": [0, 1, 2], "c2": [3, 4, 5]}, session=600_000)
    got = gm.collect()
    assert got["groupshift_group_members"] == {("g", "classic"): 2, ("g", "consumer"): 0}
    assert got["groupshift_group_epoch"] == {("g",): 3}
    h.cgh("k1", 0)
    assert h.last is not None
    for name, fields in h.last.events:
        gm.on_event(name, fields)
    got = gm.collect()
    assert got["groupshift_group_members"] == {("g", "classic"): 2, ("g", "consumer"): 1}
    assert got["groupshift_group_rebalances_by_group_total"] == {("g",): 1}
    text = registry.render()
    assert 'groupshift_group_conversions_total{group="g",direction="upgrade"} 1' in text
    assert 'groupshift_conversions_total{direction="upgrade"} 1' in text
    h.cgh("other", 0, group="g2")  # over the cap of one group
    got = gm.collect()
    assert set(got["groupshift_group_epoch"]) == {("g",)} and gm.untracked == 1


def test_classic_group_assignment_changes_are_derived_from_installed_generations() -> None:
    """A classic group's assignment is opaque bytes in the engine, overwritten in place; the
    runtime derives `member.assignment_changed` when a generation is installed."""
    h = MigrationHarness()
    h.seed_classic_group(3, {"c1": [0, 1, 2], "c2": [3, 4, 5]}, session=600_000)
    derive = ClassicAssignments()
    stable = [("group.stable", {"group": "g", "generation": 3})]
    first = {f["member"]: f for _, f in derive.derive(h.shard, stable)}
    assert first["c1"]["added"] == ["foo-0", "foo-1", "foo-2"] and first["c1"]["revoked"] == []
    assert derive.derive(h.shard, stable) == []  # nothing changed: nothing to say
    group = h.shard.classic_group("g")
    assert group is not None
    group.members["c1"].assignment = serialize_assignment({"foo": [0, 1]}, 0)
    group.members["c2"].assignment = serialize_assignment({"foo": [2, 3, 4, 5]}, 0)
    changed = {f["member"]: f for _, f in derive.derive(h.shard, stable)}
    assert (changed["c1"]["added"], changed["c1"]["revoked"]) == ([], ["foo-2"])
    assert (changed["c2"]["added"], changed["c2"]["revoked"]) == (["foo-2"], [])
    assert changed["c2"]["assigned"] == ["foo-2", "foo-3", "foo-4", "foo-5"]
    assert changed["c2"]["protocol"] == "classic" and changed["c2"]["generation"] == 3


def test_refusals_are_counted_by_direction_and_reason() -> None:
    h = MigrationHarness(**{"group_consumer_migration_policy": "downgrade"})
    h.seed_classic_group(3, {"c1": [0, 1, 2, 3, 4, 5]}, session=600_000)
    registry = MetricsRegistry()

    def groups() -> Any:
        for gid, g in h.shard.groups.items():
            yield gid, g, h.shard.offsets.group(gid)

    gm = GroupMetrics(registry, groups, h.shard.groups.get, lambda t, p: None)
    for _ in range(2):
        h.cgh("k1", 0)
        assert h.last is not None
        for name, fields in h.last.events:
            gm.on_event(name, fields)
    text = registry.render()
    assert 'groupshift_conversion_refusals_total{direction="upgrade",reason="policy"} 2' in text
    assert (
        'groupshift_group_conversion_refusals_total{group="g",direction="upgrade",reason="policy"} 2' in text
    )
    assert 'groupshift_group_members{group="g",protocol="classic"} 1' in text

"""A StreamsGroupHeartbeat must not cost the size of its group: `bench.versus_kafka --kinds
StreamsGroupHeartbeat` found each one scanning every member's tasks (who holds what) and
rebuilding every member's target, 18 ms per heartbeat in a group of 1,000 members, so a
rebalance of n members cost n^2. Kafka 4.4 keeps maps of the tasks the members hold; groupshift
now keeps them as records are replayed (`StreamsGroup.holders`). Pinned here: a steady heartbeat
builds no other member's target, the maps equal a scan of the members after every heartbeat of
a rebalance with standby replicas, a process change and a leave, and after a replay; a member
that must move still waits for the holder to let its task go."""

from __future__ import annotations

from typing import Any

import pytest

from engine.config import CoordinatorConfig
from engine.ids import SeededIds
from engine.shard import Shard
from engine.streams import heartbeat as streams_heartbeat
from engine.streams.api import StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse
from engine.streams.group import Held, MemberState, StreamsGroup, Tasks
from records.streams_group import StreamsGroupTopologyValue, Subtopology
from tests.test_streams_groups import WORD_COUNT_TOPOLOGY, Streams, image, owned_tasks

SOURCE = "events"
STATELESS = StreamsGroupTopologyValue(0, (Subtopology("0", (SOURCE,), (), (), (), (), ()),))
MEMBERS = 40


def stable_group(partitions: int = MEMBERS) -> Streams:
    """MEMBERS members joined before their source topic existed, then given its tasks."""
    s = Streams({"other": 1})
    for i in range(MEMBERS):
        s.join(f"m{i}", topology=STATELESS)
    s.shard.update_metadata(image({"other": 1, SOURCE: partitions}), s.now)
    for _ in range(3):
        for i in range(MEMBERS):
            s._remember(f"m{i}", s.hb(member_id=f"m{i}", member_epoch=s.epochs[f"m{i}"]))
    assert {(m.state, m.member_epoch) for m in s.group.members.values()} == {
        (MemberState.STABLE, s.group.assignment_epoch)
    }
    return s


class Unlisted(dict[str, Tasks]):
    """The group's targets, where listing every member's target fails the test. The compiled
    build (mypyc) calls `group_targets` natively, past the module attribute patched below, but
    reads a dict subclass through its Python methods: the check holds in both builds."""

    def items(self) -> Any:
        raise AssertionError("a steady heartbeat listed every member's target")


def test_a_steady_heartbeat_does_not_scan_the_group(monkeypatch: pytest.MonkeyPatch) -> None:
    s = stable_group()

    def group_wide(*_: object) -> None:
        raise AssertionError("a steady heartbeat looked at every member of the group")

    real = streams_heartbeat.group_targets
    monkeypatch.setattr(streams_heartbeat, "group_targets", group_wide)
    group = s.group
    group.targets = Unlisted(group.targets)
    with pytest.raises(AssertionError, match="listed every member's target"):
        real(group)  # what the dict subclass catches
    for i in range(MEMBERS):
        mid = f"m{i}"
        out = s.shard.streams_group_heartbeat(
            StreamsGroupHeartbeatRequest(group_id="app", member_id=mid, member_epoch=s.epochs[mid]),
            s.ctx,
            s.now,
        )
        r = out.response
        assert isinstance(r, StreamsGroupHeartbeatResponse)
        assert r.error_code == 0 and r.member_epoch == s.epochs[mid], r
        assert r.active_tasks is None and out.records == []


def test_a_member_moving_towards_its_target_still_waits_for_the_holder() -> None:
    """The scan is skipped only for a settled member: a joining member's task stays unreleased
    until its previous holder revokes it (revoke before assign, as before)."""
    s = stable_group(partitions=2 * MEMBERS)
    before = {mid: owned_tasks(s.owned[mid]) for mid in s.owned}
    assert {len(t) for t in before.values()} == {2}
    s.join("late", topology=STATELESS)
    # The new target moves one task to "late"; its holder has not revoked it yet, so "late"
    # gets nothing now.
    assert owned_tasks(s.owned["late"]) == set()
    for _ in range(3):
        for mid in [*before, "late"]:
            s.beat(mid)
    held = [t for mid in [*before, "late"] for t in owned_tasks(s.owned[mid])]
    assert len(held) == len(set(held)) == 2 * MEMBERS
    assert len(owned_tasks(s.owned["late"])) == 1


def _present(held: Held) -> set[tuple[str, int]]:
    return {(s, p) for s, parts in held.items() for p in parts}


def assert_holders_match_a_scan(group: StreamsGroup) -> None:
    for process in {m.process_id for m in group.members.values()} | {"nobody"}:
        h = group.holders(process)
        active, here = set(), [set(), set(), set()]  # type: ignore[var-annotated]
        for m in group.members.values():
            for roles, role in (
                ((m.active, m.active_pending_revocation), 0),
                ((m.standby, m.standby_pending_revocation), 1),
                ((m.warmup, m.warmup_pending_revocation), 2),
            ):
                for tasks in roles:
                    found = _present(tasks)
                    if role == 0:
                        active |= found
                    if m.process_id == process:
                        here[role] |= found
        assert _present(h.active) == active
        assert [_present(h.active_here), _present(h.standby_here), _present(h.warmup_here)] == here


class Recorded(Streams):
    """Streams whose every heartbeat's records are kept and the holder maps checked after it."""

    def __init__(self, **config: object) -> None:
        super().__init__(**config)
        self.log: list[object] = []

    def hb(self, **fields: object) -> StreamsGroupHeartbeatResponse:
        fields.setdefault("group_id", "app")
        self.now += 1
        out = self.shard.streams_group_heartbeat(
            StreamsGroupHeartbeatRequest(**fields),  # type: ignore[arg-type]
            self.ctx,
            self.now,
        )
        self.log += out.records
        assert_holders_match_a_scan(self.group)
        assert isinstance(out.response, StreamsGroupHeartbeatResponse)
        return out.response


def test_the_holder_maps_follow_every_record_and_survive_a_replay() -> None:
    s = Recorded(group_streams_num_standby_replicas=1)
    for mid, process in (("a", "p1"), ("b", "p1"), ("c", "p2"), ("d", "p3")):
        joined = s.hb(
            member_id=mid,
            member_epoch=0,
            rebalance_timeout_ms=30000,
            topology=WORD_COUNT_TOPOLOGY,
            process_id=process,
            active_tasks=(),
            standby_tasks=(),
            warmup_tasks=(),
        )
        s._remember(mid, joined)
        s.converge(*s.epochs, rounds=2)
    s.converge(*s.epochs, rounds=4)
    assert any(m.standby for m in s.group.members.values())
    # d moves to p2 (a new topology epoch is refused, a new process id is a metadata change)
    s._remember("d", s.hb(member_id="d", member_epoch=s.epochs["d"], process_id="p2"))
    s.converge("a", "b", "c", "d", rounds=4)
    s.hb(member_id="c", member_epoch=-1)
    del s.epochs["c"]
    s.converge("a", "b", "d", rounds=4)
    held = [t for mid in ("a", "b", "d") for t in owned_tasks(s.owned[mid])]
    assert len(held) == len(set(held)) == 8  # word count: 2 subtopologies x 4 partitions

    fresh = Shard(CoordinatorConfig(), SeededIds(7), s.shard.image)
    fresh.apply(s.log)  # type: ignore[arg-type]
    replayed = fresh.groups["app"]
    assert isinstance(replayed, StreamsGroup)
    assert_holders_match_a_scan(replayed)
    for process in ("p1", "p2", "p3"):
        assert replayed.holders(process) == s.group.holders(process)

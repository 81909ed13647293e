"""A steady StreamsGroupHeartbeat (a stable member at the group's epoch, every field null) must
not cost the size of its group: `bench.versus_kafka --kinds StreamsGroupHeartbeat` found each one
scanning every member's tasks (`_holders`) and rebuilding every member's target
(`group_targets`), 18 ms per heartbeat in a group of 1,000 members. Kafka 4.4 answers it from
the member's own state; so does groupshift now, and this pins it: the group-wide helpers raise
if a steady heartbeat reaches them, while a member that must move still gets its tasks."""

from __future__ import annotations

import pytest

from engine.streams import heartbeat as streams_heartbeat
from engine.streams.api import StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse
from engine.streams.group import MemberState
from records.streams_group import StreamsGroupTopologyValue, Subtopology
from tests.test_streams_groups import Streams, image, owned_tasks

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


def test_a_steady_heartbeat_does_not_scan_the_group(monkeypatch: pytest.MonkeyPatch) -> None:
    s = stable_group()

    def group_wide(*_: object) -> None:
        raise AssertionError("a steady heartbeat looked at every member of the group")

    monkeypatch.setattr(streams_heartbeat, "_holders", group_wide)
    monkeypatch.setattr(streams_heartbeat, "group_targets", group_wide)
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

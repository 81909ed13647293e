"""Member binding (`engine.binding`; groupshift beyond Kafka, docs/deviations.md): a live member id
or static instance id answers only to the principal that created it, on the consumer path, the
classic path and OffsetCommit; a refused request changes nothing and is reported as one
`member.binding_refused` event. Kafka's behaviour (any principal may present any id) is what
`group.member.principal.binding.enable=false` gives, and what e2e/test_member_binding.py shows on a
real Kafka node."""

from __future__ import annotations

from typing import Any

from engine.binding import REFUSED_EVENT, SWEEP_MIN, MemberBindings
from engine.classic.api import HeartbeatRequest, JoinGroupResponse, LeaveGroupRequest, MemberIdentity
from engine.context import RequestContext
from engine.errors import Errors
from engine.offsets.api import CommitPartition, CommitTopic, OffsetCommitRequest
from engine.shard import Shard
from tests.classic_harness import ClassicHarness
from tests.consumer_harness import FOO, Harness, tp
from tests.migration_harness import MigrationHarness

ALICE = "User:CN=alice"
MALLORY = "User:CN=mallory"


def as_(h: Harness, principal: str) -> None:
    h.ctx = RequestContext("client-1", "/127.0.0.1", 1, principal)


def refusals(h: Any) -> list[dict[str, Any]]:
    assert h.last is not None
    return [fields for name, fields in h.last.events if name == REFUSED_EVENT]


def commit(shard: Shard, now: int, member: str, epoch: int, principal: str, version: int = 9) -> Any:
    req = OffsetCommitRequest("g", epoch, member, None, -1, [CommitTopic("foo", [CommitPartition(0, 42)])])
    return shard.offset_commit(req, RequestContext("c", "/h", version, principal), now)


# --- the consumer protocol ----------------------------------------------------------------------


def _alice_member(h: Harness) -> Any:
    as_(h, ALICE)
    r = h.join("victim")
    assert r.error_code == 0
    h.converge("victim")
    return h.member("victim")


def test_another_principals_heartbeat_with_the_victims_id_is_refused_and_changes_nothing() -> None:
    h = Harness()
    before = _alice_member(h)
    assert before.assigned_partitions  # the victim holds every partition
    as_(h, MALLORY)
    owned = [tp(FOO)]
    r = h.hb(member_id="victim", member_epoch=before.member_epoch, topic_partitions=owned)
    assert r.error_code == Errors.UNKNOWN_MEMBER_ID
    assert r.error_message == "Member victim is not a member of group g."  # Kafka's words, nothing more
    assert h.records == [] and h.member("victim") == before
    assert refusals(h) == [
        {
            "api": "ConsumerGroupHeartbeat",
            "group": "g",
            "member": "victim",
            "principal": MALLORY,
            "bound_principal": ALICE,
            "reason": "member id bound to another principal",
        }
    ]
    # A rejoin under the victim's id (epoch 0) and a leave (-1) are refused alike.
    r = h.join("victim")
    assert r.error_code == Errors.UNKNOWN_MEMBER_ID
    r = h.hb(member_id="victim", member_epoch=-1)
    assert r.error_code == Errors.UNKNOWN_MEMBER_ID and h.member("victim") == before
    # The victim goes on as if nothing happened.
    as_(h, ALICE)
    r = h.hb(member_id="victim", member_epoch=before.member_epoch)
    assert (r.error_code, r.member_epoch) == (0, before.member_epoch) and refusals(h) == []


def test_a_member_id_the_coordinator_generated_is_bound_to_who_asked_for_it() -> None:
    h = Harness()
    as_(h, ALICE)
    r = h.hb(
        version=0,
        member_id="",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=["foo"],
        topic_partitions=[],
    )
    assert r.error_code == 0 and r.member_id
    assert h.shard.state.bindings.principal_of(("g", "member", r.member_id)) == ALICE
    as_(h, MALLORY)
    assert h.hb(member_id=r.member_id, member_epoch=r.member_epoch).error_code == Errors.UNKNOWN_MEMBER_ID


def test_another_principals_commit_with_the_victims_member_id_and_epoch_is_refused() -> None:
    h = Harness()
    victim = _alice_member(h)
    out = commit(h.shard, h.now + 1, "victim", victim.member_epoch, MALLORY)
    assert [p.error_code for t in out.response.topics for p in t.partitions] == [Errors.UNKNOWN_MEMBER_ID]
    assert out.records == () and h.shard.offsets.snapshot() == {}
    assert [f["api"] for n, f in out.events if n == REFUSED_EVENT] == ["OffsetCommit"]
    out = commit(h.shard, h.now + 2, "victim", victim.member_epoch, ALICE)
    assert [p.error_code for t in out.response.topics for p in t.partitions] == [0]


def test_a_static_instance_id_cannot_be_taken_over_by_another_principal() -> None:
    h = Harness()
    as_(h, ALICE)
    h.join("a1", instance_id="i-a")
    h.converge("a1")
    held = dict(h.member("a1").assigned_partitions)
    h.hb(member_id="a1", member_epoch=-2, instance_id="i-a")  # a restart: the instance is released
    as_(h, MALLORY)
    r = h.join("m1", instance_id="i-a")  # Kafka hands the released instance (and its partitions) over
    assert r.error_code == Errors.UNKNOWN_MEMBER_ID and r.error_message == "Instance id i-a is unknown."
    assert h.group.static_members["i-a"] == "a1" and "m1" not in h.group.members
    as_(h, ALICE)
    r = h.join("a2", instance_id="i-a")  # the real restarted instance gets its partitions back
    assert r.error_code == 0 and {t.topic_id: t.partitions for t in r.assignment or ()} == held


def test_a_binding_protects_only_a_live_id() -> None:
    """Once the bound member is gone (session expired), its instance id and its member id are free
    again, as in Kafka, and bind to whoever creates them next."""
    h = Harness()
    as_(h, ALICE)
    h.join("a1", instance_id="i-a")
    h.advance(45_001)
    assert "a1" not in h.group.members
    as_(h, MALLORY)
    assert h.join("a1", instance_id="i-a").error_code == 0
    assert h.shard.state.bindings.principal_of(("g", "instance", "i-a")) == MALLORY
    as_(h, ALICE)
    r = h.hb(member_id="a1", member_epoch=h.member("a1").member_epoch, instance_id="i-a")
    assert r.error_code == Errors.UNKNOWN_MEMBER_ID


def test_after_a_reload_the_first_principal_to_present_a_live_id_binds_it() -> None:
    """The bindings live in memory (Kafka's records have no principal): a shard rebuilt from its
    records binds each id again at its first request."""
    h = Harness()
    log: list[Any] = []
    h.shard.journal = log.extend
    victim = _alice_member(h)
    reloaded = Shard(h.shard.config, image=h.shard.image)
    for record in log:
        reloaded.replay(record)
    assert reloaded.consumer_group("g") is not None and len(reloaded.state.bindings) == 0
    h.shard = reloaded
    as_(h, ALICE)
    assert h.hb(member_id="victim", member_epoch=victim.member_epoch).error_code == 0
    as_(h, MALLORY)
    assert h.hb(member_id="victim", member_epoch=victim.member_epoch).error_code == Errors.UNKNOWN_MEMBER_ID


def test_with_binding_disabled_any_principal_may_present_any_id_as_in_kafka() -> None:
    h = Harness(**{"group.member.principal.binding.enable": False})
    victim = _alice_member(h)
    as_(h, MALLORY)
    r = h.hb(member_id="victim", member_epoch=victim.member_epoch)
    assert r.error_code == 0 and refusals(h) == []


def test_the_same_principal_everywhere_changes_nothing() -> None:
    """Every client ANONYMOUS (PLAINTEXT): nobody is ever refused."""
    h = Harness()
    h.join("a")
    h.ctx = RequestContext("other-client", "/10.0.0.9", 1)
    r = h.hb(member_id="a", member_epoch=h.member("a").member_epoch)
    assert r.error_code == 0


def test_the_bindings_of_members_that_leave_are_forgotten_at_once() -> None:
    """The soak's churn (members replaced one by one, half leaving with epoch -1, half expiring
    by session timeout, static members replaced) leaves exactly the live ids in the table, far
    below `SWEEP_MIN`: before, every departed id stayed until a sweep, which a shard of 200 members
    does not reach in hours, and the table was what grew in the soak."""
    h = Harness()
    as_(h, ALICE)
    live: list[str] = []
    for i in range(3 * SWEEP_MIN):
        member = f"m{i}"
        assert h.join(member, instance_id="i-static" if i % 7 == 0 else None).error_code == 0
        live.append(member)
        if len(live) > 4:
            gone = live.pop(0)
            if i % 3 == 0:  # goes silent: its session expires
                h.advance(45_001)
                live = [m for m in live if m in h.group.members]
            else:
                epoch = h.member(gone).member_epoch if gone in h.group.members else 0
                h.hb(member_id=gone, member_epoch=-1 if epoch else 0)
        keys = {k for k in h.shard.state.bindings._principals}
        expected = {("g", "member", m) for m in h.group.members} | {
            ("g", "instance", i) for i in h.group.static_members
        }
        assert keys == expected, i
    assert len(h.shard.state.bindings) <= 6 and not h.shard.state.bindings.departed


def test_a_converted_groups_member_ids_stay_bound() -> None:
    """A member's records deleted by an operation that keeps the id live (here a static member
    replaced under the same instance id) does not lose the instance binding."""
    h = Harness()
    as_(h, ALICE)
    h.join("a1", instance_id="i-a")
    h.hb(member_id="a1", member_epoch=-2, instance_id="i-a")  # a static member's temporary leave
    assert h.join("a2", instance_id="i-a").error_code == 0
    bindings = h.shard.state.bindings
    assert bindings.principal_of(("g", "instance", "i-a")) == ALICE
    assert bindings.principal_of(("g", "member", "a1")) is None  # replaced: forgotten
    assert bindings.principal_of(("g", "member", "a2")) == ALICE


def test_stale_bindings_are_swept() -> None:
    bindings = MemberBindings()
    for i in range(SWEEP_MIN + 1):
        bindings.bind_created({}, ("g", "member", f"m{i}"), ALICE)
    assert len(bindings) == 0  # none of them is live in the (empty) groups map


# --- the classic protocol -----------------------------------------------------------------------


class PrincipalHarness(ClassicHarness):
    principal = "User:ANONYMOUS"

    def ctx(self, version: int, client_id: str = "client") -> RequestContext:
        return RequestContext(client_id, "/127.0.0.1", version, self.principal)


def test_classic_heartbeat_sync_join_leave_and_commit_with_the_victims_id_are_refused() -> None:
    h = PrincipalHarness()
    h.principal = ALICE
    (victim,) = h.stable_group(1)
    gen = h.group.generation_id
    assignment = h.group.members[victim].assignment
    h.principal = MALLORY
    assert h.heartbeat(victim, gen) == Errors.UNKNOWN_MEMBER_ID
    assert h.sync(victim, gen).error_code == Errors.UNKNOWN_MEMBER_ID
    assert h.join(member_id=victim).error_code == Errors.UNKNOWN_MEMBER_ID
    assert h.leave((victim, None)).error_code == Errors.UNKNOWN_MEMBER_ID
    assert [f["api"] for n, f in h.last.events if n == REFUSED_EVENT] == ["LeaveGroup"]  # type: ignore[union-attr]
    out = commit(h.shard, h.now + 1, victim, gen, MALLORY, version=8)
    assert [p.error_code for t in out.response.topics for p in t.partitions] == [Errors.UNKNOWN_MEMBER_ID]
    # Nothing happened to the victim's group.
    assert list(h.group.members) == [victim] and h.group.generation_id == gen
    assert h.group.members[victim].assignment == assignment
    h.principal = ALICE
    assert h.heartbeat(victim, gen) == 0


def test_a_classic_pending_member_id_is_bound_from_member_id_required() -> None:
    h = PrincipalHarness()
    h.principal = ALICE
    first = h.join()
    assert isinstance(first, JoinGroupResponse) and first.error_code == Errors.MEMBER_ID_REQUIRED
    h.principal = MALLORY
    assert h.join(member_id=first.member_id).error_code == Errors.UNKNOWN_MEMBER_ID
    h.principal = ALICE
    h.join(member_id=first.member_id)
    assert first.member_id in h.group.members


def test_classic_static_member_replacement_by_another_principal_is_refused() -> None:
    h = PrincipalHarness()
    h.principal = ALICE
    parked = h.join(instance_id="i-a")
    h.advance(1)
    victim = h.result(parked).member_id
    h.sync(victim, h.group.generation_id, {victim: b"x"}, instance_id="i-a")
    h.principal = MALLORY
    r = h.result(h.join(instance_id="i-a"))
    assert r is not None and r.error_code == Errors.UNKNOWN_MEMBER_ID
    assert h.group.static_members["i-a"] == victim and list(h.group.members) == [victim]
    h.principal = ALICE
    r = h.result(h.join(instance_id="i-a"))  # the real instance restarting replaces itself
    assert r is not None and r.error_code == 0 and h.group.static_members["i-a"] != victim


# --- a classic member inside a consumer group (the translation layer) ---------------------------


def test_a_classic_member_inside_a_consumer_group_is_bound_too() -> None:
    h = MigrationHarness(topics={"foo": 3})
    assert h.cgh("E1", 0, topics=["foo"]).error_code == Errors.NONE
    first = h.join()
    assert isinstance(first, JoinGroupResponse) and first.error_code == Errors.MEMBER_ID_REQUIRED
    victim = first.member_id
    assert h.shard.state.bindings.principal_of(("g", "member", victim)) == "User:ANONYMOUS"
    h.join(victim)
    group = h.shard.consumer_group("g")
    assert group is not None and victim in group.members
    before = group.members[victim]
    mallory = RequestContext("m", "/10.0.0.66", 4, MALLORY)
    for out in (
        h.shard.heartbeat(HeartbeatRequest("g", before.member_epoch, victim, None), mallory, h.tick()),
        h.shard.leave_group(LeaveGroupRequest("g", [MemberIdentity(victim)]), mallory, h.tick()),
        h.shard.heartbeat(HeartbeatRequest("g", 1, "E1", None), mallory, h.tick()),
    ):
        assert out.response.error_code == Errors.UNKNOWN_MEMBER_ID
        assert [n for n, _ in out.events] == [REFUSED_EVENT] and out.records == ()
    assert h.shard.consumer_group("g") is group and group.members[victim] == before

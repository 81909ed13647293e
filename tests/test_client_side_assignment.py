"""Client-side assignors (KIP-848 as designed; docs/client-side-assignors.md): the engine's rules.

Each test drives one shard with `group.consumer.client.assignors.enable` and asserts the
responses, the records written and the resulting target; the replay test rebuilds the state from
the records (through the record codec, so tagged field 10000 is exercised too)."""

from __future__ import annotations

from typing import Any

import pytest

from engine.consumer import record_builders as rb
from engine.consumer.api import ConsumerGroupHeartbeatResponse
from engine.consumer.client_assignment import (
    InstallAssignmentRequest,
    InstallAssignmentResponse,
    PrepareAssignmentRequest,
    PrepareAssignmentResponse,
    choose,
)
from engine.consumer.member import ConsumerGroupMember
from engine.errors import Errors
from engine.ids import SeededIds
from engine.shard import Shard
from records.codec import decode_record, encode_record
from records.consumer_group import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ClientAssignmentMetadata,
    ClientAssignorMetadata,
)
from records.coordinator import CoordinatorRecord
from tests.consumer_harness import BAR, FOO, Harness

ON = {"group_consumer_client_assignors_enable": True}
META = ClientAssignmentMetadata(3, b"assignor's own bytes")


def ca(
    name: str = "sticky", lo: int = 0, hi: int = 0, version: int = 0, meta: bytes = b""
) -> ClientAssignorMetadata:
    return ClientAssignorMetadata(name, lo, hi, 0, version, meta)


class Group:
    """A harness that keeps every record written, for the replay test."""

    def __init__(self, **config: Any) -> None:
        self.h = Harness(**{**ON, **config})
        self.log: list[CoordinatorRecord] = []

    def _keep(self) -> None:
        assert self.h.last is not None
        self.log.extend(self.h.last.records)

    def join(
        self, mid: str, assignors: tuple[ClientAssignorMetadata, ...] | None, **kw: Any
    ) -> ConsumerGroupHeartbeatResponse:
        r = self.h.join(mid, client_assignors=assignors, **kw)
        self._keep()
        return r

    def hb(self, mid: str, **kw: Any) -> ConsumerGroupHeartbeatResponse:
        m = self.h.member(mid)
        owned = [rb_tp(t, p) for t, p in m.assigned_partitions.items()]
        if m.member_epoch == 0:
            # Before the group's first installed target a member stays at epoch 0, so its
            # heartbeat is a rejoin and carries what a join carries (docs/client-side-assignors.md).
            kw.setdefault("rebalance_timeout_ms", m.rebalance_timeout_ms)
            kw.setdefault("subscribed_topic_names", list(m.subscribed_topic_names))
        r = self.h.hb(member_id=mid, member_epoch=m.member_epoch, topic_partitions=owned, **kw)
        self._keep()
        return r

    def prepare(self, mid: str, epoch: int | None = None) -> PrepareAssignmentResponse:
        if epoch is None:
            epoch = self.h.member(mid).member_epoch
        self.h.now += 1
        out = self.h.shard.prepare_assignment(
            PrepareAssignmentRequest("g", mid, epoch), self.h.now, self.h.ctx.principal
        )
        self.log.extend(out.records)
        assert isinstance(out.response, PrepareAssignmentResponse)
        return out.response

    def install(
        self,
        mid: str,
        members: dict[str, dict[Any, tuple[int, ...]]],
        group_epoch: int | None = None,
        error: int = 0,
        metadata: dict[str, ClientAssignmentMetadata] | None = None,
    ) -> InstallAssignmentResponse:
        g = self.h.group
        req = InstallAssignmentRequest(
            "g",
            mid,
            self.h.member(mid).member_epoch,
            g.group_epoch if group_epoch is None else group_epoch,
            error,
            members,
            metadata or {},
        )
        self.h.now += 1
        out = self.h.shard.install_assignment(req, self.h.now, self.h.ctx.principal)
        self.log.extend(out.records)
        self.last_records = list(out.records)
        assert isinstance(out.response, InstallAssignmentResponse)
        return out.response

    def advance(self, ms: int) -> None:
        for o in self.h.advance(ms):
            self.log.extend(o.records)


def rb_tp(t: Any, p: tuple[int, ...]) -> Any:
    from records.consumer_group import TopicPartitions

    return TopicPartitions(t, tuple(p))


# --- the choice ----------------------------------------------------------------------------------


def test_member_selection_picks_the_member_covering_every_version_in_use() -> None:
    # KIP-848's example: A [1-5], B [3-4], C [2-4] -> A.
    members = [
        ConsumerGroupMember("B", client_assignors=(ca(lo=3, hi=4, version=4),)),
        ConsumerGroupMember("C", client_assignors=(ca(lo=2, hi=4, version=2),)),
        ConsumerGroupMember("A", client_assignors=(ca(lo=1, hi=5, version=5),)),
    ]
    choice = choose(members)
    assert choice is not None and choice.name == "sticky" and choice.assigning_member == "A"
    assert choice.versions == {2, 4, 5}


def test_assignor_must_be_supported_by_every_member_in_priority_order() -> None:
    members = [
        ConsumerGroupMember("A", client_assignors=(ca("rack"), ca("sticky"))),
        ConsumerGroupMember("B", client_assignors=(ca("sticky"),)),
    ]
    choice = choose(members)
    assert choice is not None and choice.name == "sticky"
    # a member without client assignors: the server assignor is used
    assert choose([*members, ConsumerGroupMember("C")]) is None
    # no common name: the server assignor
    assert choose([members[0], ConsumerGroupMember("D", client_assignors=(ca("other"),))]) is None


def test_classic_members_count_as_metadata_version_minus_one() -> None:
    classic = ConsumerGroupMember(
        "K",
        classic_member_metadata=ClassicMemberMetadata(45000, (ClassicProtocol("sticky", b"userdata"),)),
    )
    reads_classic = ConsumerGroupMember("A", client_assignors=(ca(lo=-1, hi=2, version=2),))
    cannot = ConsumerGroupMember("B", client_assignors=(ca(lo=0, hi=3, version=2),))
    c1 = choose([cannot, reads_classic, classic])
    assert c1 is not None and c1.assigning_member == "A" and -1 in c1.versions
    c2 = choose([cannot, classic])
    assert c2 is not None and c2.assigning_member is None
    # a classic member that does not speak the protocol name: no client assignor at all
    other = ConsumerGroupMember(
        "K2", classic_member_metadata=ClassicMemberMetadata(45000, (ClassicProtocol("range", b""),))
    )
    assert choose([reads_classic, other]) is None


# --- the flag ------------------------------------------------------------------------------------


def test_flag_off_ignores_the_client_assignor_field() -> None:
    """Flag off: responses, records and state are those of a heartbeat without the field."""
    outs = []
    for assignors in (None, (ca(),)):
        h = Harness()
        r1 = h.join("m1", client_assignors=assignors)
        recs = h.records
        r2 = h.hb(member_id="m1", member_epoch=r1.member_epoch, client_assignors=assignors)
        outs.append((r1, recs, r2, h.group.persisted_state()))
    assert outs[0] == outs[1]
    assert outs[1][0].compute_assignment_epoch is None
    assert outs[1][0].assignment  # the server assignor computed the target


# --- heartbeat: COMPUTE_ASSIGNMENT ---------------------------------------------------------------


def test_assigning_member_is_asked_and_server_assignor_does_not_run() -> None:
    g = Group()
    r = g.join("m1", (ca(lo=0, hi=2, version=1),))
    assert r.error_code == 0
    assert r.compute_assignment_epoch == g.h.group.group_epoch == 2
    assert "k7" not in g.h.record_types() and "k6" not in g.h.record_types()
    assert g.h.group.assignment_epoch == 0
    assert "client-assignment-timeout-g-m1" in g.h.timer_keys()
    # m2 joins with a narrower range: m1 still covers every version; m2 is not asked
    r2 = g.join("m2", (ca(lo=1, hi=1, version=1),))
    assert r2.compute_assignment_epoch is None
    assert g.hb("m1").compute_assignment_epoch == 3


def test_join_leaving_no_member_able_to_read_every_version_is_refused() -> None:
    g = Group()
    g.join("m1", (ca(lo=0, hi=1, version=1),))
    r = g.join("m2", (ca(lo=2, hi=3, version=3),))
    assert r.error_code == Errors.UNSUPPORTED_ASSIGNOR
    assert "m2" not in g.h.group.members


def test_client_assignor_refused_when_it_cannot_read_classic_members() -> None:
    """Online upgrade: a classic member (version -1) is in the group; a consumer member whose
    assignor cannot read version -1 is refused, one that can is accepted and chosen."""
    g = Group()
    g.join("m1", (ca("sticky", lo=0, hi=1, version=1),))
    classic = ConsumerGroupMember(
        "k1",
        subscribed_topic_names=("foo",),
        rebalance_timeout_ms=30000,
        classic_member_metadata=ClassicMemberMetadata(45000, (ClassicProtocol("sticky", b"old"),)),
    )
    rec = rb.member_metadata("g", classic)
    g.h.shard.replay(rec)
    g.log.append(rec)
    refused = g.join("m2", (ca("sticky", lo=0, hi=1, version=1),))
    assert refused.error_code == Errors.UNSUPPORTED_ASSIGNOR
    assert "version" in (refused.error_message or "") and "-1" in (refused.error_message or "")
    ok = g.join("m3", (ca("sticky", lo=-1, hi=2, version=2),))
    assert ok.error_code == 0
    assert ok.compute_assignment_epoch == g.h.group.group_epoch  # the one that reads them all
    prep = g.prepare("m3")
    assert prep.error_code == 0
    by_id = {m.member_id: m for m in prep.members}
    assert by_id["k1"].metadata_version == -1 and by_id["k1"].metadata == b"old"


# --- PrepareAssignment ---------------------------------------------------------------------------


def test_prepare_returns_the_group_state_to_the_assigning_member_only() -> None:
    g = Group()
    g.join("m1", (ca(lo=0, hi=2, version=1, meta=b"m1"),), rack_id="r1")
    g.join("m2", (ca(lo=0, hi=1, version=1, meta=b"m2"),), topics=("foo", "bar"))
    p = g.prepare("m1")
    assert p.error_code == 0
    assert p.group_epoch == g.h.group.group_epoch
    assert p.assignor_name == "sticky"
    assert [(m.member_id, m.rack_id, m.metadata) for m in p.members] == [
        ("m1", "r1", b"m1"),
        ("m2", None, b"m2"),
    ]
    assert set(p.members[1].subscribed_topic_ids) == {FOO, BAR}
    assert {(t.topic_name, t.num_partitions) for t in p.topics} == {("foo", 6), ("bar", 3)}
    assert g.prepare("m2").error_code == Errors.UNKNOWN_MEMBER_ID
    assert g.prepare("m1", epoch=99).error_code == Errors.STALE_MEMBER_EPOCH
    assert g.prepare("nobody", epoch=0).error_code == Errors.UNKNOWN_MEMBER_ID


# --- InstallAssignment ---------------------------------------------------------------------------


def _two_members() -> Group:
    g = Group()
    g.join("m1", (ca(lo=0, hi=2, version=1),))
    g.join("m2", (ca(lo=0, hi=1, version=1),))
    return g


def test_install_writes_target_records_and_members_reconcile() -> None:
    g = _two_members()
    epoch = g.h.group.group_epoch
    r = g.install("m1", {"m1": {FOO: (0, 1, 2)}, "m2": {FOO: (3, 4, 5)}}, metadata={"m2": META})
    assert r.error_code == 0, r
    types = [f"k{x.key.RECORD_TYPE}" for x in g.last_records]
    assert types == ["k7", "k7", "k6"]
    assert g.h.group.assignment_epoch == epoch
    assert dict(g.h.group.target("m2")) == {FOO: (3, 4, 5)}
    assert "client-assignment-timeout-g-m1" not in g.h.timer_keys()
    assert g.last_records[1].value.client_metadata == META  # type: ignore[union-attr]
    assert g.hb("m1").assignment_metadata is None
    r2 = g.hb("m2")
    assert r2.assignment_metadata == META  # sent with the assignment
    assert dict(g.h.member("m2").assigned_partitions) == {FOO: (3, 4, 5)}
    assert g.hb("m2").assignment_metadata is None  # a steady heartbeat carries neither
    assert g.hb("m1").compute_assignment_epoch is None


@pytest.mark.parametrize(
    ("members", "why"),
    [
        ({"m1": {FOO: (0, 1)}, "m2": {FOO: (1, 2)}}, "given to both"),
        ({"m1": {BAR: (0,)}}, "does not subscribe"),
        ({"m1": {FOO: (6,)}}, "does not exist"),
        ({"ghost": {FOO: (0,)}}, "is not a member"),
    ],
)
def test_invalid_install_is_refused_and_keeps_the_target(members: dict[str, Any], why: str) -> None:
    g = _two_members()
    before = g.h.group.persisted_state()
    r = g.install("m1", members)
    assert r.error_code == Errors.INVALID_REQUEST
    assert why in (r.error_message or "")
    assert g.last_records == []
    assert g.h.group.persisted_state() == before
    assert g.hb("m1").compute_assignment_epoch == g.h.group.group_epoch  # still asked


def test_assignor_error_keeps_the_current_target() -> None:
    g = _two_members()
    assert g.install("m1", {"m1": {FOO: (0, 1, 2)}, "m2": {FOO: (3, 4, 5)}}).error_code == 0
    g.join("m3", (ca(lo=0, hi=1, version=1),))
    epoch = g.h.group.group_epoch
    r = g.install("m1", {}, error=1)
    assert r.error_code == 0
    assert [f"k{x.key.RECORD_TYPE}" for x in g.last_records] == ["k6"]
    assert g.h.group.assignment_epoch == epoch
    assert dict(g.h.group.target("m1")) == {FOO: (0, 1, 2)}
    assert dict(g.h.group.target("m2")) == {FOO: (3, 4, 5)}
    assert g.hb("m1").compute_assignment_epoch is None  # not asked again until the group changes


def test_install_for_an_older_epoch_is_refused_and_recomputed() -> None:
    g = _two_members()
    old_epoch = g.h.group.group_epoch
    g.join("m3", (ca(lo=0, hi=1, version=1),))
    r = g.install("m1", {"m1": {FOO: (0, 1, 2)}, "m2": {FOO: (3, 4, 5)}}, group_epoch=old_epoch)
    assert r.error_code == Errors.REBALANCE_IN_PROGRESS
    assert f"epoch {old_epoch}" in (r.error_message or "")
    assert g.h.group.assignment_epoch == 0
    assert g.hb("m1").compute_assignment_epoch == g.h.group.group_epoch == old_epoch + 1


def test_a_static_takeover_between_prepare_and_install_is_computed_again() -> None:
    """Found by the client-assignor simulator (19 installs refused INVALID_REQUEST in 10^6 steps):
    a static member was replaced after PrepareAssignment; the takeover keeps the group epoch
    (KIP-345), so the install, at the group epoch, named the replaced id and was refused as
    invalid, and the member reported an assignor error: the group kept its older target."""
    g = Group()
    g.join("m1", (ca(lo=0, hi=2, version=1),))
    g.join("s1", (ca(lo=0, hi=1, version=1),), instance_id="i1")
    epoch = g.h.group.group_epoch
    assert {m.member_id for m in g.prepare("m1").members} == {"m1", "s1"}
    g.h.hb(member_id="s1", member_epoch=-2, instance_id="i1")  # leaves, keeping its place
    g.join("s2", (ca(lo=0, hi=1, version=1),), instance_id="i1")  # and is replaced
    assert set(g.h.group.members) == {"m1", "s2"} and g.h.group.group_epoch == epoch
    r = g.install("m1", {"m1": {FOO: (0, 1, 2)}, "s1": {FOO: (3, 4, 5)}})
    assert r.error_code == Errors.REBALANCE_IN_PROGRESS, r
    assert g.last_records == [] and g.h.group.assignment_epoch == 0
    assert "client-assignment-timeout-g-m1" in g.h.timer_keys()  # the same deadline runs
    assert g.hb("m1").compute_assignment_epoch == epoch  # asked again, for the same epoch
    assert {m.member_id for m in g.prepare("m1").members} == {"m1", "s2"}
    # an invented id, with every member named, is still invalid
    invented = g.install("m1", {"m1": {FOO: (0,)}, "s2": {FOO: (1,)}, "ghost": {FOO: (2,)}})
    assert invented.error_code == Errors.INVALID_REQUEST
    assert g.install("m1", {"m1": {FOO: (0, 1, 2)}, "s2": {FOO: (3, 4, 5)}}).error_code == 0
    assert dict(g.h.group.target("s2")) == {FOO: (3, 4, 5)}


def test_assigning_member_that_does_not_install_in_time_is_fenced() -> None:
    g = Group()
    g.join("m1", (ca(lo=0, hi=2, version=1),), rebalance_timeout_ms=5000)
    g.join("m2", (ca(lo=0, hi=2, version=1),))
    g.hb("m2")
    g.advance(5001)
    assert "m1" not in g.h.group.members
    # m2 is now chosen and asked (its session is alive)
    r = g.hb("m2")
    assert r.compute_assignment_epoch == g.h.group.group_epoch
    assert g.prepare("m2").error_code == 0


def test_replay_rebuilds_the_live_state() -> None:
    g = _two_members()
    g.install("m1", {"m1": {FOO: (0, 1, 2)}, "m2": {FOO: (3, 4, 5)}})
    g.hb("m1")
    g.hb("m2")
    g.join("m3", (ca(lo=0, hi=1, version=1, meta=b"x"),))
    g.install("m1", {"m1": {FOO: (0, 1)}, "m2": {FOO: (3, 4)}, "m3": {FOO: (2, 5)}}, metadata={"m3": META})
    g.hb("m1")
    fresh = Shard(g.h.shard.config, SeededIds(3), g.h.shard.image)
    fresh.apply(decode_record(*encode_record(r)) for r in g.log)
    live = g.h.group.persisted_state()
    replayed = fresh.consumer_group("g")
    assert replayed is not None
    assert replayed.persisted_state() == live
    assert replayed.members["m3"].client_assignors == (ca(lo=0, hi=1, version=1, meta=b"x"),)
    assert replayed.target_client_metadata == {"m3": META}


def test_member_record_carries_client_assignors_in_tag_10000() -> None:
    """Without client assignors the value is byte-identical to Kafka's; with them one tagged
    field (tag 10000, after tag 0 when the member is classic) that Kafka's reader skips."""
    from records.codec import encode_value
    from records.consumer_group import ConsumerGroupMemberMetadataValue
    from records.consumer_group_codec import CLIENT_ASSIGNORS_TAG

    base = ConsumerGroupMemberMetadataValue(None, None, "c", "/h", ("foo",), None, 30000, None)
    plain = encode_value(base)
    assert plain is not None and plain.endswith(b"\x00")
    assignors = (ca(lo=-1, hi=3, version=2, meta=b"md"),)
    classic = ClassicMemberMetadata(45000, (ClassicProtocol("sticky", b"u"),))
    for value in (
        base.__class__(**{**_fields(base), "client_assignors": assignors}),
        base.__class__(
            **{**_fields(base), "client_assignors": assignors, "classic_member_metadata": classic}
        ),
    ):
        data = encode_value(value)
        assert data is not None and data.startswith(plain[:-1])
        assert b"\x90\x4e" in data  # uvarint(10000)
        key_bytes, value_bytes = encode_record(CoordinatorRecord(rb_key(), value))
        assert decode_record(key_bytes, value_bytes).value == value
    assert CLIENT_ASSIGNORS_TAG == 10000


def _fields(v: Any) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}


def rb_key() -> Any:
    from records.consumer_group import ConsumerGroupMemberMetadataKey

    return ConsumerGroupMemberMetadataKey("g", "m")


def test_a_member_id_bound_to_another_principal_is_refused_as_unknown() -> None:
    g = _two_members()
    principal = g.h.ctx.principal
    shard, now = g.h.shard, g.h.now + 1
    req = PrepareAssignmentRequest("g", "m1", g.h.member("m1").member_epoch)
    assert shard.prepare_assignment(req, now, principal).response.error_code == 0
    stolen = shard.prepare_assignment(req, now, "User:mallory")
    assert stolen.response.error_code == Errors.UNKNOWN_MEMBER_ID
    install = InstallAssignmentRequest("g", "m1", 0, g.h.group.group_epoch, 0, {"m1": {FOO: (0,)}})
    assert (
        shard.install_assignment(install, now, "User:mallory").response.error_code == Errors.UNKNOWN_MEMBER_ID
    )
    assert g.h.group.assignment_epoch == 0


def test_describe_names_the_client_assignor_in_use() -> None:
    g = _two_members()
    (described,) = g.h.shard.describe_consumer_groups(["g"])
    assert described.assignor_name == "sticky"
    off = Harness()
    off.join("m1", client_assignors=(ca(),))
    (plain,) = off.shard.describe_consumer_groups(["g"])
    assert plain.assignor_name == "uniform"


def test_the_choice_at_a_static_takeover_is_the_one_the_records_leave() -> None:
    """Found by the client-assignor simulator (seed 1253): a consumer-protocol static member
    replaced a classic static member. The heartbeat's choice still counted the replaced classic
    member (version -1) and asked the newcomer to compute, while the group the records leave (the
    classic member removed, the newcomer last) chooses the first member: PrepareAssignment then
    refused the newcomer, and the group waited for its rebalance timeout."""
    from engine.consumer.client_assignment import members_with
    from engine.consumer.group import ConsumerGroup

    group = ConsumerGroup("g")
    first = ConsumerGroupMember(
        "A", client_assignors=(ca("sticky", 2, 3, 2), ca("cooperative-sticky", 1, 4, 2))
    )
    classic = ConsumerGroupMember(
        "K",
        instance_id="inst-d",
        classic_member_metadata=ClassicMemberMetadata(5000, (ClassicProtocol("cooperative-sticky", b""),)),
    )
    group.members = {"A": first, "K": classic}
    newcomer = ConsumerGroupMember(
        "D",
        instance_id="inst-d",
        client_assignors=(ca("cooperative-sticky", -1, 2, 0), ca("sticky", 2, 3, 2)),
    )
    old = ConsumerGroupMember("D", instance_id="inst-d")  # the replaced member under the new id
    after = members_with(group, old, newcomer)
    assert [m.member_id for m in after] == ["A", "D"]
    got = choose(after)
    assert got is not None and (got.name, got.assigning_member) == ("sticky", "A")
    # a member updated in place keeps its place
    assert [m.member_id for m in members_with(group, first, first)] == ["A", "K"]

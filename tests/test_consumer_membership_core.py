"""The sans-IO member of `consumer_membership.core` (docs/client-side-assignors.md, "The client"):
the join and the fields each heartbeat carries, reconciliation (revoke, then assign, then tell
the coordinator), a computation (COMPUTE_ASSIGNMENT -> PrepareAssignment -> assign ->
InstallAssignment), an assignor that raises or is refused installing an error, a stale install
left for the next epoch, fencing (lost, rejoin at epoch 0), the leave, and the heartbeat
response's groupshift tags read by the wire layer."""

from __future__ import annotations

import datetime
import uuid
from types import SimpleNamespace

import pytest
from kio.index import load_response_schema

from consumer_membership.assignor import Assignor, GroupAssignment, GroupState, MemberAssignment
from consumer_membership.core import (
    CONSUMER_GROUP_HEARTBEAT,
    FIND_COORDINATOR,
    INSTALL_ASSIGNMENT,
    METADATA,
    PREPARE_ASSIGNMENT,
    Assigned,
    Computed,
    ConsumerMembershipCore,
    Fatal,
    HeartbeatAnswer,
    Joined,
    Request,
    Revoked,
    Settings,
    State,
)
from consumer_membership.sticky import StickyAssignor
from protocol import client_assignment_wire as caw
from protocol.codec import api_schema, encode_response
from protocol.entity_builder import build

T = uuid.UUID(int=7)


class Raising(Assignor):
    name = "sticky"

    def assign(self, group: GroupState) -> GroupAssignment:
        raise RuntimeError("boom")


class Invalid(Assignor):
    name = "sticky"

    def assign(self, group: GroupState) -> GroupAssignment:
        return {"nobody": MemberAssignment({T: (0,)})}


def found(core: ConsumerMembershipCore, now: float = 0.0) -> None:
    r = core.next_request(now)
    assert r is not None and r.api_key == FIND_COORDINATOR
    core.on_response(
        r, SimpleNamespace(coordinators=[SimpleNamespace(error_code=0, node_id=0, host="h", port=1)]), now
    )


def hb(
    code: int = 0,
    epoch: int = 1,
    partitions: tuple[int, ...] | None = None,
    compute: int | None = None,
    member_id: str = "",
) -> HeartbeatAnswer:
    assignment = (
        None
        if partitions is None
        else SimpleNamespace(topic_partitions=[SimpleNamespace(topic_id=T, partitions=list(partitions))])
    )
    r = SimpleNamespace(
        error_code=code,
        error_message=None,
        member_id=member_id,
        member_epoch=epoch,
        heartbeat_interval=datetime.timedelta(seconds=1),
        assignment=assignment,
    )
    return HeartbeatAnswer(r, compute, None)


def core(assignor: Assignor | None = None) -> ConsumerMembershipCore:
    c = ConsumerMembershipCore(
        Settings("g", ("t",), rebalance_timeout_ms=5000), [assignor or StickyAssignor()], member_id="m1"
    )
    found(c)
    return c


def send(c: ConsumerMembershipCore, now: float, api: int) -> Request:
    r = c.next_request(now)
    assert r is not None and r.api_key == api, r
    return r


def prepared(epoch: int = 3) -> caw.PrepareAssignmentResponse:
    members = tuple(caw.PreparedMember(m, 1, None, None, (T,), 0, 0, b"", ()) for m in ("m1", "m2"))
    return caw.PrepareAssignmentResponse(0, None, epoch, "sticky", members, (caw.PreparedTopic(T, "t", 4),))


def test_join_then_partial_heartbeats_and_reconciliation() -> None:
    c = core()
    join = send(c, 0.0, CONSUMER_GROUP_HEARTBEAT)
    assert join.body["member_epoch"] == 0 and join.body["subscribed_topic_names"] == ["t"]
    assert join.body["rebalance_timeout"] == 5000 and join.body["topic_partitions"] == []
    assert join.assignors is not None and join.assignors[0].name == "sticky"
    c.on_response(join, hb(epoch=1, partitions=(0, 1)), 0.1)
    assert c.state is State.STABLE and c.owned == {(T, 0), (T, 1)}
    assert c.events() == [Joined("m1", 1), Assigned(frozenset({(T, 0), (T, 1)}), 1)]
    ack = send(c, 0.1, CONSUMER_GROUP_HEARTBEAT)  # at once: the owned partitions changed
    assert ack.body["topic_partitions"] == [{"topic_id": T, "partitions": [0, 1]}]
    assert ack.body["subscribed_topic_names"] is None and ack.body["rebalance_timeout"] == -1
    assert ack.assignors is None  # unchanged since the join: the tag is left out
    c.on_response(ack, hb(epoch=1), 0.2)
    assert c.next_request(0.5) is None and c.wakeup(0.5) == pytest.approx(1.2)
    beat = send(c, 1.2, CONSUMER_GROUP_HEARTBEAT)
    assert beat.body["topic_partitions"] is None
    # a new assignment: revoke first, then assign
    c.on_response(beat, hb(epoch=2, partitions=(1, 2)), 1.3)
    assert c.events() == [Revoked(frozenset({(T, 0)}), lost=False), Assigned(frozenset({(T, 2)}), 2)]


def test_a_computation_prepares_assigns_and_installs() -> None:
    c = core()
    join = send(c, 0.0, CONSUMER_GROUP_HEARTBEAT)
    c.on_response(join, hb(epoch=0, compute=3), 0.1)
    assert c.state is State.JOINING
    prep = send(c, 0.1, PREPARE_ASSIGNMENT)
    assert prep.body == caw.PrepareAssignmentRequest("g", "m1", 0)
    c.on_response(prep, prepared(), 0.2)
    install = send(c, 0.2, INSTALL_ASSIGNMENT)
    req = install.body
    assert isinstance(req, caw.InstallAssignmentRequest) and req.group_epoch == 3 and req.error == 0
    assert {m.member_id: m.partitions[0].partitions for m in req.members} == {"m1": (0, 2), "m2": (1, 3)}
    c.on_response(install, caw.InstallAssignmentResponse(), 0.3)
    assert c.events() == [Joined("m1", 0), Computed(3, 0, True)]
    again = send(c, 0.3, CONSUMER_GROUP_HEARTBEAT)  # a full rejoin heartbeat (still epoch 0)
    assert again.body["subscribed_topic_names"] == ["t"]
    c.on_response(again, hb(epoch=0, compute=3), 0.4)  # a repeat for an epoch installed: ignored
    assert c.next_request(0.4) is None  # no second PrepareAssignment
    assert send(c, 1.4, CONSUMER_GROUP_HEARTBEAT).body["member_epoch"] == 0


@pytest.mark.parametrize("assignor", [Raising(), Invalid()], ids=["raises", "refused"])
def test_an_assignor_failure_installs_an_error(assignor: Assignor) -> None:
    c = core(assignor)
    join = send(c, 0.0, CONSUMER_GROUP_HEARTBEAT)
    c.on_response(join, hb(epoch=4, compute=5), 0.1)
    prep = send(c, 0.1, PREPARE_ASSIGNMENT)
    c.on_response(prep, prepared(5), 0.2)
    install = send(c, 0.2, INSTALL_ASSIGNMENT)
    if isinstance(assignor, Invalid):
        assert install.body.error == 0
        c.on_response(install, caw.InstallAssignmentResponse(42, "Invalid assignment: member nobody"), 0.3)
        assert next(e for e in c.events() if isinstance(e, Computed)).installed is False
        install = send(c, 0.3, INSTALL_ASSIGNMENT)
    assert install.body.error == 1 and install.body.members == ()
    c.on_response(install, caw.InstallAssignmentResponse(), 0.4)
    assert Computed(5, 1, True) in c.events()
    assert c.state is State.STABLE  # not fatal: the group keeps its target


def test_a_stale_install_waits_for_the_next_epoch() -> None:
    c = core()
    join = send(c, 0.0, CONSUMER_GROUP_HEARTBEAT)
    c.on_response(join, hb(epoch=2, compute=3), 0.1)
    c.on_response(send(c, 0.1, PREPARE_ASSIGNMENT), prepared(3), 0.2)
    install = send(c, 0.2, INSTALL_ASSIGNMENT)
    c.on_response(install, caw.InstallAssignmentResponse(27, "computed for 3, group at 4"), 0.3)
    beat = send(c, 0.3, CONSUMER_GROUP_HEARTBEAT)
    c.on_response(beat, hb(epoch=2, compute=4), 0.4)
    assert send(c, 0.4, PREPARE_ASSIGNMENT).body.member_epoch == 2


def test_fenced_member_loses_its_partitions_and_rejoins() -> None:
    c = core()
    join = send(c, 0.0, CONSUMER_GROUP_HEARTBEAT)
    c.on_response(join, hb(epoch=3, partitions=(0,)), 0.1)
    c.events()
    ack = send(c, 0.1, CONSUMER_GROUP_HEARTBEAT)
    c.on_response(ack, hb(code=110), 0.2)  # FENCED_MEMBER_EPOCH
    assert c.events() == [Revoked(frozenset({(T, 0)}), lost=True)]
    assert not any(isinstance(e, Joined) for e in c.events())
    rejoin = send(c, 0.2, CONSUMER_GROUP_HEARTBEAT)
    assert rejoin.body["member_epoch"] == 0 and rejoin.body["member_id"] == "m1"
    assert rejoin.assignors is not None


def test_fatal_error_and_leave() -> None:
    c = core()
    join = send(c, 0.0, CONSUMER_GROUP_HEARTBEAT)
    c.on_response(join, hb(code=112), 0.1)  # UNSUPPORTED_ASSIGNOR
    (fatal,) = c.events()
    assert isinstance(fatal, Fatal) and fatal.error.code == 112 and c.state is State.FAILED
    d = core()
    j = send(d, 0.0, CONSUMER_GROUP_HEARTBEAT)
    d.on_response(j, hb(epoch=1, partitions=(2,)), 0.1)
    d.events()
    leave = d.close()
    assert leave is not None and leave.body["member_epoch"] == -1
    assert d.events() == [Revoked(frozenset({(T, 2)}), lost=False)]


def test_the_wire_layer_reads_the_heartbeat_response_tags() -> None:
    response = build(
        load_response_schema(68, 1),
        dict(
            throttle_time=0,
            error_code=0,
            error_message=None,
            member_id="m1",
            member_epoch=4,
            heartbeat_interval=1000,
            assignment={"topic_partitions": [{"topic_id": T, "partitions": [1, 2]}]},
        ),
    )
    schema = api_schema(68, 1)
    assert schema is not None
    frame = encode_response(schema, 9, response)[4:]
    tags = {
        caw.COMPUTE_ASSIGNMENT_TAG: caw.compute_assignment_field(5),
        caw.ASSIGNMENT_METADATA_TAG: caw.assignment_metadata_field(2, b"x"),
    }
    tagged = caw.with_top_level_tags(frame, tags)
    at = caw.heartbeat_response_tags_start(tagged, caw.response_body_offset(tagged))
    assert caw.read_compute_assignment(tagged, at) == 5
    assert caw.read_assignment_metadata(tagged, at) == (2, b"x")
    assert caw.without_top_level_tags(tagged, at) == frame
    with pytest.raises(caw.MalformedExtension):
        caw.without_top_level_tags(tagged + b"\x00", at)


class SeesRacks(Assignor):
    name = "sticky"
    uses_partition_racks = True

    def __init__(self) -> None:
        self.seen: list[GroupState] = []

    def assign(self, group: GroupState) -> GroupAssignment:
        self.seen.append(group)
        return {}


def test_an_assignor_using_partition_racks_gets_them_from_metadata() -> None:
    assignor = SeesRacks()
    c = core(assignor)
    join = send(c, 0.0, CONSUMER_GROUP_HEARTBEAT)
    c.on_response(join, hb(epoch=1, compute=3), 0.1)
    c.on_response(send(c, 0.1, PREPARE_ASSIGNMENT), prepared(3), 0.2)
    metadata = c.next_request(0.2)
    assert metadata is not None and metadata.api_key == METADATA and not metadata.to_coordinator
    assert [t["name"] for t in metadata.body["topics"]] == ["t"]
    brokers = [SimpleNamespace(node_id=1, rack="r1"), SimpleNamespace(node_id=2, rack="r2")]
    partitions = [
        SimpleNamespace(partition_index=i, replica_nodes=nodes)
        for i, nodes in enumerate([[1], [2], [1, 2], [3]])
    ]
    c.on_response(
        metadata,
        SimpleNamespace(
            brokers=brokers, topics=[SimpleNamespace(name="t", error_code=0, partitions=partitions)]
        ),
        0.3,
    )
    (group,) = assignor.seen
    assert group.topics[T].partition_racks == (
        frozenset({"r1"}),
        frozenset({"r2"}),
        frozenset({"r1", "r2"}),
        frozenset(),
    )
    assert send(c, 0.3, INSTALL_ASSIGNMENT).body.error == 0
    # a failed Metadata request computes without racks rather than not at all
    other = SeesRacks()
    d = core(other)
    j = send(d, 0.0, CONSUMER_GROUP_HEARTBEAT)
    d.on_response(j, hb(epoch=1, compute=3), 0.1)
    d.on_response(send(d, 0.1, PREPARE_ASSIGNMENT), prepared(3), 0.2)
    d.on_failure(send(d, 0.2, METADATA), 0.3, "refused")
    assert d.next_request(0.35) is None  # the backoff, and not a heartbeat interval more
    assert d.wakeup(0.35) == pytest.approx(0.4)
    assert send(d, 0.5, INSTALL_ASSIGNMENT).body.error == 0
    assert other.seen and other.seen[0].topics[T].partition_racks is None


def test_a_fenced_member_computes_again_for_a_group_whose_epochs_restarted() -> None:
    """Found by the client-assignor simulator: a member that installed for epoch 36 was fenced
    (UNKNOWN_MEMBER_ID: the group had gone classic); it rejoined the group that converted back,
    whose epochs restart at the classic generation, and ignored COMPUTE_ASSIGNMENT(3) as a repeat,
    so the group waited for its rebalance timeout, again and again."""
    c = core()
    join = send(c, 0.0, CONSUMER_GROUP_HEARTBEAT)
    c.on_response(join, hb(epoch=0, compute=36), 0.1)
    c.on_response(send(c, 0.1, PREPARE_ASSIGNMENT), prepared(), 0.2)
    c.on_response(send(c, 0.2, INSTALL_ASSIGNMENT), caw.InstallAssignmentResponse(), 0.3)
    beat = send(c, 0.3, CONSUMER_GROUP_HEARTBEAT)
    c.on_response(beat, hb(code=25), 0.4)  # UNKNOWN_MEMBER_ID
    rejoin = send(c, 0.4, CONSUMER_GROUP_HEARTBEAT)
    assert rejoin.body["member_epoch"] == 0
    c.on_response(rejoin, hb(epoch=2, compute=3), 0.5)
    assert send(c, 0.5, PREPARE_ASSIGNMENT).body.member_epoch == 2

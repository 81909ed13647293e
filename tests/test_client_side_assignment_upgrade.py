"""Client-side assignors and the online upgrade (KIP-848 "Supporting Online Consumer Group
Upgrade" with a client assignor; docs/client-side-assignors.md): the case KAFKA-18134 refuses on
Kafka. A classic group whose members use `cooperative-sticky` is joined by a consumer-protocol
member whose client assignor of the same name reads metadata version -1: the group converts, the
new member is chosen to compute and sees the classic members' subscription bytes at version -1.
A client assignor that cannot read version -1 is refused with UNSUPPORTED_ASSIGNOR. Classic
assignments carrying user data (the custom assignor KAFKA-18134 refuses to replace) convert only
for such a member."""

from __future__ import annotations

from engine.consumer.api import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from engine.consumer.client_assignment import PrepareAssignmentRequest
from engine.context import RequestContext
from engine.errors import Errors
from records.consumer_group import ClientAssignorMetadata
from tests.migration_harness import KIP848_CLIENT, ClassicSeed, MigrationHarness, assignment, sub

NAME = "cooperative-sticky"


def join(h: MigrationHarness, member_id: str, lo: int) -> ConsumerGroupHeartbeatResponse:
    req = ConsumerGroupHeartbeatRequest(
        "g",
        member_id,
        0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=["foo"],
        topic_partitions=[],
        client_assignors=(ClientAssignorMetadata(NAME, lo, 2, 0, 2, b"new"),),
    )
    r = h.process(h.shard.consumer_group_heartbeat(req, RequestContext(*KIP848_CLIENT, 1), h.tick()))
    assert isinstance(r, ConsumerGroupHeartbeatResponse)
    return r


def seeded(user_data: bytes | None = None, enable: bool = True) -> MigrationHarness:
    h = MigrationHarness(group_consumer_client_assignors_enable=enable)
    meta1 = sub("foo", version=3, owned={"foo": [0, 1, 2]})
    meta2 = sub("foo", version=3, owned={"foo": [3, 4, 5]})
    h.seed_classic(
        3,
        [
            ClassicSeed("c1", meta1, assignment(3, user_data, foo=[0, 1, 2])),
            ClassicSeed("c2", meta2, assignment(3, user_data, foo=[3, 4, 5])),
        ],
        protocol=NAME,
    )
    return h


def test_upgrade_with_a_client_assignor_that_reads_classic_metadata() -> None:
    h = seeded()
    r = join(h, "n1", lo=-1)
    assert r.error_code == 0, r
    g = h.shard.consumer_group("g")
    assert g is not None and set(g.members) == {"c1", "c2", "n1"}
    assert r.compute_assignment_epoch == g.group_epoch > g.assignment_epoch
    prepared = h.shard.prepare_assignment(
        PrepareAssignmentRequest("g", "n1", r.member_epoch), h.tick(), "User:ANONYMOUS"
    ).response
    assert prepared.error_code == 0 and prepared.assignor_name == NAME
    by_id = {m.member_id: m for m in prepared.members}
    assert by_id["c1"].metadata_version == -1 and by_id["c1"].metadata == sub(
        "foo", version=3, owned={"foo": [0, 1, 2]}
    )
    assert by_id["n1"].metadata == b"new"
    assert {mid: dict(m.target) for mid, m in by_id.items() if m.target} == {
        "c1": {g.subscription_metadata["foo"].topic_id: (0, 1, 2)},
        "c2": {g.subscription_metadata["foo"].topic_id: (3, 4, 5)},
    }


def test_upgrade_with_a_client_assignor_that_cannot_read_classic_metadata_is_refused() -> None:
    h = seeded()
    r = join(h, "n1", lo=0)
    assert r.error_code == Errors.UNSUPPORTED_ASSIGNOR, r
    assert "-1" in (r.error_message or "")
    assert h.shard.consumer_group("g") is None  # still the classic group: nothing converted
    assert h.shard.classic_group("g") is not None


def test_assignment_user_data_converts_only_for_a_client_assignor_reading_classic_metadata() -> None:
    """KAFKA-18134: Kafka (and groupshift without a suitable client assignor) refuses to upgrade a
    group whose classic assignments carry user data; a joining member whose client assignor of
    the group's protocol reads version -1 takes the custom assignor's place."""
    r = join(seeded(b"sticky-state", enable=False), "n1", lo=-1)
    assert r.error_code == Errors.GROUP_ID_NOT_FOUND and "custom assignor" in (r.error_message or ""), r
    h = seeded(b"sticky-state")
    r = join(h, "n2", lo=0)  # cannot read the classic members' metadata: still refused
    assert r.error_code == Errors.GROUP_ID_NOT_FOUND and "custom assignor" in (r.error_message or ""), r
    assert h.shard.classic_group("g") is not None
    r = join(h, "n1", lo=-1)
    assert r.error_code == 0, r
    g = h.shard.consumer_group("g")
    assert g is not None and set(g.members) == {"c1", "c2", "n1"}


def test_a_refused_upgrade_still_answers_the_joins_it_ended() -> None:
    """Found by the client-assignor chaos simulator (sim/client_assignment_chaos.py, seed 1): a
    consumer-protocol member joins a classic group with a parked JoinGroup; the conversion tells
    the parked member to rejoin (REBALANCE_IN_PROGRESS, as Kafka's convertToConsumerGroup
    completes the join futures) and the heartbeat is then refused UNSUPPORTED_ASSIGNOR. The
    answer already given must be sent: the classic group no longer counts that join as parked,
    and a dropped answer left the member waiting until the join phase fenced it ("did not rejoin
    in time"). Kafka's futures, completed in place, are not taken back by a later exception."""
    from engine.classic.member import Protocol
    from engine.outcome import Pending

    h = seeded()
    parked = h.join("c1", protocols=(Protocol(NAME, sub("foo", version=3, owned={"foo": [0, 1, 2]})),))
    assert isinstance(parked, Pending), parked  # c1 rejoins: the group prepares a rebalance
    r = join(h, "n1", lo=0)  # cannot read version -1: refused after the conversion began
    assert r.error_code == Errors.UNSUPPORTED_ASSIGNOR, r
    assert h.shard.classic_group("g") is not None and h.shard.consumer_group("g") is None
    answer = h.result(parked)
    assert answer is not None and answer.error_code == Errors.REBALANCE_IN_PROGRESS, answer

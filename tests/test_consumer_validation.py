"""ConsumerGroupHeartbeat request validation (Kafka `throwIfConsumerGroupHeartbeatRequestIsInvalid`, Kafka
4.0 rules)."""

from __future__ import annotations

import pytest

from engine.errors import Errors
from tests.consumer_harness import FOO, Harness, tp


def test_empty_group_id_is_invalid_request() -> None:
    h = Harness()
    r = h.join("m1", group_id="  ")
    assert r.error_code == Errors.INVALID_REQUEST
    assert r.error_message == "GroupId can't be empty."
    assert h.last is not None and not h.last.records


def test_empty_instance_id_is_invalid_request() -> None:
    r = Harness().join("m1", instance_id="")
    assert (r.error_code, r.error_message) == (Errors.INVALID_REQUEST, "InstanceId can't be empty.")


def test_empty_rack_id_is_invalid_request() -> None:
    r = Harness().join("m1", rack_id=" ")
    assert (r.error_code, r.error_message) == (Errors.INVALID_REQUEST, "RackId can't be empty.")


def test_v1_requires_a_client_generated_member_id() -> None:
    r = Harness().join("")
    assert (r.error_code, r.error_message) == (Errors.INVALID_REQUEST, "MemberId can't be empty.")


def test_v0_join_without_member_id_gets_a_22_character_server_generated_id() -> None:
    h = Harness()
    r = h.hb(
        version=0,
        member_id="",
        member_epoch=0,
        rebalance_timeout_ms=1000,
        subscribed_topic_names=["foo"],
        topic_partitions=[],
    )
    assert r.error_code == 0
    assert r.member_id is not None and len(r.member_id) == 22
    assert r.member_id in h.group.members
    assert "=" not in r.member_id and not r.member_id.startswith("-")


def test_v0_heartbeat_with_positive_epoch_requires_member_id() -> None:
    r = Harness().hb(version=0, member_id="", member_epoch=3)
    assert (r.error_code, r.error_message) == (Errors.INVALID_REQUEST, "MemberId can't be empty.")


def test_join_without_rebalance_timeout_is_invalid() -> None:
    r = Harness().join("m1", rebalance_timeout_ms=-1)
    assert r.error_code == Errors.INVALID_REQUEST
    assert r.error_message == "RebalanceTimeoutMs must be provided in first request."


@pytest.mark.parametrize("owned", [None, [tp(FOO, 0)]])
def test_join_must_report_empty_owned_partitions(owned: object) -> None:
    r = Harness().join("m1", topic_partitions=owned)
    assert r.error_code == Errors.INVALID_REQUEST
    assert r.error_message == "TopicPartitions must be empty when (re-)joining."


def test_join_needs_topic_names_or_regex() -> None:
    r = Harness().join("m1", topics=None)
    assert r.error_code == Errors.INVALID_REQUEST
    assert "SubscribedTopicNames or SubscribedTopicRegex" in (r.error_message or "")


def test_join_with_empty_topic_list_is_a_member_without_topics() -> None:
    h = Harness()
    r = h.join("m1", topics=())
    assert r.error_code == 0 and r.member_epoch == 1
    assert r.assignment == ()
    assert h.member("m1").subscribed_topic_names == ()


def test_static_leave_requires_instance_id() -> None:
    r = Harness().hb(member_id="m1", member_epoch=-2)
    assert (r.error_code, r.error_message) == (Errors.INVALID_REQUEST, "InstanceId can't be null.")


def test_member_epoch_below_minus_two_is_invalid() -> None:
    r = Harness().hb(member_id="m1", member_epoch=-3)
    assert (r.error_code, r.error_message) == (Errors.INVALID_REQUEST, "MemberEpoch is invalid.")


def test_unknown_server_assignor_is_unsupported_assignor_listing_supported_names() -> None:
    r = Harness().join("m1", server_assignor="sticky")
    assert r.error_code == Errors.UNSUPPORTED_ASSIGNOR
    assert r.error_message == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."


def test_invalid_regex_is_invalid_regular_expression_and_writes_nothing() -> None:
    h = Harness()
    r = h.join("m1", topics=None, subscribed_topic_regex="foo(")
    assert r.error_code == Errors.INVALID_REGULAR_EXPRESSION
    assert "foo(" in (r.error_message or "")
    assert h.last is not None and not h.last.records
    assert h.shard.consumer_group("g") is None


def test_rejected_request_emits_a_structured_event() -> None:
    h = Harness()
    h.join("m1", rebalance_timeout_ms=-1)
    assert h.last is not None
    [(name, fields)] = h.last.events
    assert name == "request.rejected"
    assert fields["error"] == "INVALID_REQUEST" and fields["member"] == "m1"


def test_rejected_join_logs_only_the_rejection_not_the_join_it_did_not_make() -> None:
    """A join refused late (the regex fails after the member was built) writes nothing, so its
    log must not claim a `member.joined` either: only the explanation of the refusal."""
    h = Harness()
    h.join("m0")
    r = h.join("m1", topics=None, subscribed_topic_regex="foo(")
    assert r.error_code == Errors.INVALID_REGULAR_EXPRESSION
    assert h.last is not None and not h.last.records
    assert [name for name, _ in h.last.events] == ["request.rejected"]
    assert "m1" not in h.group.members

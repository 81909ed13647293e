"""Differential: ConsumerGroupHeartbeat request validation, every field, both versions, against a
real Apache Kafka 4.x node and groupshift (Kafka `GroupCoordinatorService`'s request validator
and the member-epoch checks of `GroupMetadataManager`).

Each row is one request sent to a fresh group after the group's coordinator is up; the answers
(error code, error message, and for accepted requests the fields that do not depend on epochs)
are compared field by field.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from e2e.differential import Session, compare, run_both

pytestmark = pytest.mark.e2e

MEMBER = "2b7f3e0c-1d5a-4c8e-9f00-0123456789ab"

# (id, version, fields overriding a valid first join, known deviations {path regex: reason})
CASES: list[tuple[str, int, dict[str, Any], dict[str, str]]] = [
    ("v1-empty-member-id-join", 1, {"member_id": ""}, {}),
    ("v1-empty-member-id-heartbeat", 1, {"member_id": "", "member_epoch": 3}, {}),
    ("v1-empty-member-id-leave", 1, {"member_id": "", "member_epoch": -1}, {}),
    ("v0-empty-member-id-heartbeat", 0, {"member_id": "", "member_epoch": 3}, {}),
    ("v0-empty-member-id-leave", 0, {"member_id": "", "member_epoch": -1}, {}),
    ("v1-empty-group-id", 1, {"group_id": ""}, {}),
    ("v0-empty-group-id", 0, {"group_id": ""}, {}),
    ("v1-empty-member-and-group-id", 1, {"member_id": "", "group_id": ""}, {}),
    ("v1-empty-instance-id", 1, {"instance_id": ""}, {}),
    ("v1-empty-rack-id", 1, {"rack_id": ""}, {}),
    ("v0-empty-rack-id", 0, {"rack_id": ""}, {}),
    ("v1-join-without-rebalance-timeout", 1, {"rebalance_timeout": -1}, {}),
    ("v1-join-with-null-owned-partitions", 1, {"topic_partitions": None}, {}),
    (
        "v1-join-with-owned-partitions",
        1,
        {"topic_partitions": [{"topic_id": uuid.UUID(int=7), "partitions": [0]}]},
        {},
    ),
    ("v1-join-without-subscription", 1, {"subscribed_topic_names": None}, {}),
    ("v0-join-without-subscription", 0, {"subscribed_topic_names": None}, {}),
    ("v1-static-leave-without-instance-id", 1, {"member_epoch": -2}, {}),
    ("v1-epoch-below-minus-two", 1, {"member_epoch": -3}, {}),
    ("v0-epoch-below-minus-two", 0, {"member_epoch": -7}, {}),
    ("v1-unknown-assignor", 1, {"server_assignor": "sticky-custom"}, {}),
    ("v1-unknown-member-heartbeat", 1, {"member_epoch": 5}, {}),
    ("v1-unknown-member-leave", 1, {"member_epoch": -1}, {}),
    ("v1-unknown-static-member-leave", 1, {"member_epoch": -2, "instance_id": "i-1"}, {}),
    *[
        (f"v1-invalid-regex-{name}", 1, {"subscribed_topic_names": None, "subscribed_topic_regex": rx}, {})
        for name, rx in [
            ("missing-bracket", "[a-"),
            ("missing-paren", "(a"),
            ("unexpected-paren", "a)"),
            ("trailing-backslash", "a\\"),
            ("missing-repeat-argument", "*"),
            ("nested-repeat", "a**"),
            ("bad-escape", "\\q"),
            ("bad-range", "[z-a]"),
            ("repeat-count", "a{1001}"),
            ("lookahead", "(?=a)b"),
        ]
    ],
]


def _fields(s: Session, over: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "group_id": s.group(),
        "member_id": MEMBER,
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": 30000,
        "subscribed_topic_names": [s.topic()],
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [],
    }
    fields.update(over)
    return fields


@pytest.mark.parametrize(("case", "version", "over", "known"), CASES, ids=[c[0] for c in CASES])
def test_heartbeat_validation(
    case: str,
    version: int,
    over: dict[str, Any],
    known: dict[str, str],
    differential_pair: tuple[str, str],
) -> None:
    def scenario(s: Session) -> None:
        s.create_topic(s.topic(), 2)
        s.wait_coordinator(s.group())
        r = s.raw(68, version, **_fields(s, over))
        s.note(
            "ConsumerGroupHeartbeat",
            {
                "error_code": r.error_code,
                "error_message": r.error_message,
                "member_id_given": bool(r.member_id),
            },
        )

    compare(run_both(scenario, *differential_pair), known)


def test_rebalance_timeout_below_minus_one(differential_pair: tuple[str, str]) -> None:
    """Kafka's validator rejects only -1 on a join; groupshift refuses any negative timeout
    (docs/deviations.md)."""

    def scenario(s: Session) -> None:
        s.create_topic(s.topic(), 2)
        s.wait_coordinator(s.group())
        r = s.raw(68, 1, **_fields(s, {"rebalance_timeout": -5}))
        s.note("ConsumerGroupHeartbeat", {"error_code": r.error_code, "error_message": r.error_message})

    outcome = run_both(scenario, *differential_pair)
    assert outcome.kafka[0].response["error_code"] == "none"
    assert outcome.groupshift[0].response == {
        "error_code": "invalid_request",
        "error_message": "RebalanceTimeoutMs must be -1 (unchanged) or a positive value.",
    }

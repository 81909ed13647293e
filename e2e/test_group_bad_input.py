"""Invalid field values on the group APIs, sent on raw connections while real consumer groups
(one KIP-848 group, one classic group) consume on other connections: each request gets Kafka's
error code on a connection that stays open, and neither group notices anything (no epoch bump,
no rebalance, no assign/revoke callback, no stall in consumption).
"""

from __future__ import annotations

import itertools
import time
import uuid
from typing import Any

from e2e.conftest import Gateways
from e2e.expected import COUNT, PARTITIONS, PER_PARTITION
from e2e.groups import (
    FAST_GROUP_SETTINGS,
    ConfluentMember,
    KafkaPythonMember,
    Ledger,
    PacedProducer,
    committed_offsets,
    create_topic,
    wait_partitioned,
    wait_until,
)
from protocol.client import WireClient, make_request

INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT, INVALID_REQUEST = 24, 26, 42
UNKNOWN_MEMBER_ID, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION = 25, 112, 128
LIVE_CONSUMER, LIVE_CLASSIC = "bad-input-consumer", "bad-input-classic"


def cgh(
    group_id: str = "bad-input-other",
    member_id: str = "bad-member-000000000001",
    member_epoch: int = 0,
    **overrides: Any,
) -> Any:
    """A ConsumerGroupHeartbeat v1 join (epoch 0) with valid fields unless overridden."""
    values = {
        "group_id": group_id,
        "member_id": member_id,
        "member_epoch": member_epoch,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": 30000,
        "subscribed_topic_names": ["bad-input-orders"],
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [],
    }
    return make_request(68, 1, **{**values, **overrides})


def join_group(group_id: str, session_timeout: int = 10000, member_id: str = "") -> Any:
    return make_request(
        11,
        5,
        group_id=group_id,
        session_timeout=session_timeout,
        rebalance_timeout=30000,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"}],
    )


def cases() -> list[tuple[str, Any, Any]]:
    """(name, request, check(response) -> None)."""

    def cgh_error(code: int, message_part: str | None = None) -> Any:
        def check(r: Any) -> None:
            # Kafka builds error answers from the schema defaults: epoch 0, no member id
            assert (r.error_code, r.member_id, r.member_epoch, r.assignment) == (code, None, 0, None), r
            assert r.error_message, r
            if message_part is not None:
                assert message_part in r.error_message, r.error_message

        return check

    def join_error(code: int) -> Any:
        def check(r: Any) -> None:
            assert (r.error_code, r.generation_id, r.members) == (code, -1, ()), r

        return check

    return [
        ("JoinGroup with an empty group id", join_group(""), join_error(INVALID_GROUP_ID)),
        (
            "JoinGroup below the minimum session timeout",
            join_group(LIVE_CLASSIC, session_timeout=5),
            join_error(INVALID_SESSION_TIMEOUT),
        ),
        (
            "Heartbeat with an empty group id",
            make_request(12, 4, group_id="", generation_id=1, member_id="m", group_instance_id=None),
            lambda r: r.error_code == INVALID_GROUP_ID or _fail(r),
        ),
        (
            "Heartbeat of an unknown member of the live classic group",
            make_request(
                12, 4, group_id=LIVE_CLASSIC, generation_id=1, member_id="nobody", group_instance_id=None
            ),
            lambda r: r.error_code == UNKNOWN_MEMBER_ID or _fail(r),
        ),
        ("ConsumerGroupHeartbeat with an empty group id", cgh(group_id=""), cgh_error(INVALID_REQUEST)),
        ("ConsumerGroupHeartbeat with a blank group id", cgh(group_id="  "), cgh_error(INVALID_REQUEST)),
        ("ConsumerGroupHeartbeat with member epoch -3", cgh(member_epoch=-3), cgh_error(INVALID_REQUEST)),
        (
            "ConsumerGroupHeartbeat with member epoch -100",
            cgh(group_id=LIVE_CONSUMER, member_epoch=-100),
            cgh_error(INVALID_REQUEST),
        ),
        ("ConsumerGroupHeartbeat v1 without a member id", cgh(member_id=""), cgh_error(INVALID_REQUEST)),
        (
            "ConsumerGroupHeartbeat leaving with -2 and no instance id",
            cgh(group_id=LIVE_CONSUMER, member_epoch=-2),
            cgh_error(INVALID_REQUEST),
        ),
        (
            "ConsumerGroupHeartbeat joining with owned partitions",
            cgh(group_id=LIVE_CONSUMER, topic_partitions=[{"topic_id": _ZERO, "partitions": [0]}]),
            cgh_error(INVALID_REQUEST),
        ),
        (
            "ConsumerGroupHeartbeat with the invalid regex '('",
            cgh(group_id=LIVE_CONSUMER, subscribed_topic_names=None, subscribed_topic_regex="("),
            cgh_error(INVALID_REGULAR_EXPRESSION),
        ),
        (
            "ConsumerGroupHeartbeat with an invalid regex in a new group",
            cgh(subscribed_topic_names=None, subscribed_topic_regex="bad-input-[z-a]"),
            cgh_error(INVALID_REGULAR_EXPRESSION),
        ),
        (
            "ConsumerGroupHeartbeat with an unknown server assignor",
            cgh(group_id=LIVE_CONSUMER, server_assignor="no-such-assignor"),
            cgh_error(UNSUPPORTED_ASSIGNOR, "no-such-assignor"),
        ),
    ]


def _fail(r: Any) -> bool:
    raise AssertionError(r)


_ZERO = uuid.UUID(int=0)


def test_bad_group_requests_get_kafkas_errors_and_disturb_nobody(gateways: Gateways) -> None:
    gw = gateways.start("group-bad-input", sets=FAST_GROUP_SETTINGS)
    topic = "bad-input-orders"
    create_topic(gw, topic)
    ledgers = {LIVE_CONSUMER: Ledger(topic), LIVE_CLASSIC: Ledger(topic)}
    groups = {
        LIVE_CONSUMER: [
            ConfluentMember(
                f"c{i}", ledgers[LIVE_CONSUMER], gw.bootstrap, LIVE_CONSUMER, **{"group.protocol": "consumer"}
            )
            for i in range(3)
        ],
        LIVE_CLASSIC: [
            KafkaPythonMember(f"k{i}", ledgers[LIVE_CLASSIC], gw.bootstrap, LIVE_CLASSIC) for i in range(3)
        ],
    }
    producer = PacedProducer(gw, topic, seconds=4.0)
    producer.start()
    for m in itertools.chain(*groups.values()):
        m.start()
    try:
        before = {g: wait_partitioned(ms, f"{g} to assign") for g, ms in groups.items()}
        mark, stable_at = gw.log_path.stat().st_size, time.monotonic()
        producer.go()
        wait_until(lambda: all(lg.distinct() > 100 for lg in ledgers.values()), 30, "consumption")

        with WireClient(gw.port) as c:
            for name, request, check in cases():
                try:
                    check(c.request(request))
                except AssertionError as e:
                    raise AssertionError(f"{name}: {e}") from None
            # the connection is still usable after every error answer
            assert (
                c.request(
                    make_request(18, 3, client_software_name="e2e", client_software_version="1")
                ).error_code
                == 0
            )
        assert gw.alive()

        wait_until(lambda: producer.finished, 30, "the producer")
        end = dict.fromkeys(range(PARTITIONS), PER_PARTITION)
        for g, ledger in ledgers.items():
            wait_until(lambda ledger=ledger: ledger.distinct() >= COUNT, 60, f"{g} to consume")
            wait_until(lambda g=g: committed_offsets(gw, g, topic) == end, 20, f"{g} to commit", interval=0.3)
            ledger.check_consumed()
            stamps = sorted(r.at for r in ledger.reads)
            gap = max(b - a for a, b in itertools.pairwise(stamps))
            assert gap < 1.5, f"{g} stalled for {gap:.2f}s"
        for g, ms in groups.items():
            assert {m.name: m.assignment for m in ms} == before[g], g
            for m in ms:
                assert ledgers[g].callbacks_of(m.name, since=stable_at) == [], m.name
                assert not m.errors, (m.name, m.errors)

        # nothing happened to either group on the gateway, and nothing was created
        for event in (
            "group.epoch_bumped",
            "group.rebalance_prepared",
            "group.generation_started",
            "member.joined",
            "member.fenced",
            "member.left",
            "group.converted",
        ):
            assert gw.events(event, since=mark) == [], event
        rejected = [e for e in gw.events("request.rejected", since=mark) if "api" in e]
        assert len(rejected) >= 10, rejected
    finally:
        for m in itertools.chain(*groups.values()):
            if m.live:
                m.stop()

    with WireClient(gw.port) as c:
        listed = c.request(make_request(16, 5, states_filter=[], types_filter=[]))
    assert sorted(g.group_id for g in listed.groups) == sorted(groups)

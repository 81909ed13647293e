"""The classic Kafka Streams group views without a server (tools/groups/streams_classic.py and
`check upgrade`'s rule for such a group, tools/check/rules.py): members built from Kafka Streams'
wire bytes (translation.streams_classic_protocol), each conversion blocker with its reason, the
positive answer when nothing blocks, and the members table in the streams-group shape. The live
run against a Kafka Streams 3.9 application is e2e/test_streams_classic_groups.py."""

from __future__ import annotations

import uuid

import pytest

from records.classic_group import GroupMemberMetadata, GroupMetadataKey, GroupMetadataValue
from records.coordinator import CoordinatorRecord
from tools.check.facts import GroupFacts, MemberFacts, facts_from_records
from tools.check.rules import NOT_READY, READY, Settings, upgrade_verdict
from tools.groups.migration import Observation, Tracker, render, report
from tools.groups.output import Style
from tools.groups.snapshot import Group, Member
from tools.groups.streams_classic import ClassicStreamsView, conversion_blockers, decode_member, members_table
from translation.embedded_protocol import Assignment, Subscription
from translation.streams_classic_protocol import (
    LATEST_OFFSET,
    AssignmentInfo,
    HostPartitions,
    SubscriptionInfo,
    TaskId,
    TaskOffsetSum,
    encode_assignment_info,
    encode_subscription_info,
)

TOPICS = ("app-words-repartition", "words-in")


def _subscription_bytes(sub: Subscription) -> bytes:
    """A ConsumerProtocolSubscription v0 (topics, user data), as a Streams consumer writes it
    before v1's owned partitions; enough for these views."""
    out = (0).to_bytes(2, "big") + len(sub.topics).to_bytes(4, "big")
    for t in sub.topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    assert sub.user_data is not None
    return out + len(sub.user_data).to_bytes(4, "big") + sub.user_data


def _assignment_bytes(a: Assignment) -> bytes:
    out = (0).to_bytes(2, "big") + len(a.partitions).to_bytes(4, "big")
    for t, ps in a.partitions:
        out += len(t).to_bytes(2, "big") + t.encode() + len(ps).to_bytes(4, "big")
        out += b"".join(p.to_bytes(4, "big") for p in ps)
    assert a.user_data is not None
    return out + len(a.user_data).to_bytes(4, "big") + a.user_data


def member_bytes(
    version: int = 11, topics: tuple[str, ...] = TOPICS, endpoint: str = "h1:7001", error: int = 0
) -> tuple[bytes, bytes]:
    latest = -1 if version <= 2 else max(version, 11)
    if version > 11:
        info = SubscriptionInfo(version, latest, uuid.UUID(int=0), future=b"\x00" * 20)
    elif version >= 7:
        info = SubscriptionInfo(
            version,
            latest,
            uuid.UUID(int=7),
            user_endpoint=endpoint.encode(),
            task_offset_sums=(TaskOffsetSum(TaskId(0, 1), LATEST_OFFSET), TaskOffsetSum(TaskId(1, 0), 5)),
            error_code=error if version >= 9 else 0,
        )
    else:
        info = SubscriptionInfo(version, latest, uuid.UUID(int=7), (TaskId(0, 1),), (), endpoint.encode())
    meta = _subscription_bytes(Subscription(0, topics, encode_subscription_info(info)))
    ainfo = AssignmentInfo(
        min(version, 11),
        min(latest, 11) if version >= 3 else -1,
        (TaskId(0, 1), TaskId(1, 1)),
        ((TaskId(1, 0), (("app-counts-changelog", 0),)),),
        (HostPartitions("h1", 7001, (("words-in", 1),)),) if version >= 2 else (),
    )
    assignment = _assignment_bytes(Assignment(0, (("words-in", (1,)),), encode_assignment_info(ainfo)))
    return meta, assignment


def test_member_decoded_from_streams_bytes() -> None:
    m = decode_member("m1", "app-StreamThread-1-consumer", "/h", None, *member_bytes())
    assert m.decode_error is None
    assert m.process_id == str(uuid.UUID(int=7)) and m.endpoint == "h1:7001"
    assert m.assignment.active == {"0": [1], "1": [1]} and m.assignment.standby == {"1": [0]}
    assert m.previous.active == {"0": [1]} and m.previous.standby == {"1": [0]}
    assert m.subscription_version == 11 and m.assignment_version == 11
    table = members_table("app", ClassicStreamsView("stream", [m], []), True, Style(False))
    assert "ACTIVE: 0:[1]; 1:[1]; STANDBY: 1:[0];" in table and "h1:7001" in table


def test_garbage_metadata_is_a_decode_error_not_a_traceback() -> None:
    m = decode_member("m1", "c", "/h", None, b"\x00\x00\x00\x00\x00\x00", b"\x00")
    assert m.decode_error
    (blocker,) = conversion_blockers("stream", [m])
    assert blocker[0] == "streams-metadata" and "does not decode" in blocker[1]


@pytest.mark.parametrize(
    ("protocol", "members", "check", "words"),
    [
        ("custom", [member_bytes()], "streams-assignor", "custom partition assignor"),
        ("stream", [member_bytes(12)], "streams-version", "newer than the 11"),
        ("stream", [member_bytes(5), member_bytes(5)], "streams-version", "upgrade.from"),
        ("stream", [member_bytes(11), member_bytes(10)], "streams-versions-differ", "version probing"),
        (
            "stream",
            [member_bytes(), member_bytes(topics=("other",))],
            "streams-topology",
            "different topologies",
        ),
        ("stream", [member_bytes(error=2)], "streams-error", "error code 2"),
    ],
)
def test_each_blocker_has_its_reason(
    protocol: str, members: list[tuple[bytes, bytes]], check: str, words: str
) -> None:
    decoded = [
        decode_member(f"m{i}", "app-StreamThread-1-consumer", "/h", None, *b) for i, b in enumerate(members)
    ]
    found = dict(conversion_blockers(protocol, decoded))
    assert check in found and words in found[check], found


def _facts(members: list[tuple[bytes, bytes]], protocol: str = "stream") -> GroupFacts:
    return GroupFacts(
        group="app",
        type="classic",
        protocol_type="consumer",
        protocol=protocol,
        members=tuple(
            MemberFacts(
                member_id=f"m{i}",
                client_id="app-StreamThread-1-consumer",
                streams_metadata=meta,
                streams_assignment=assignment,
            )
            for i, (meta, assignment) in enumerate(members)
        ),
    )


def test_check_upgrade_says_it_converts_online() -> None:
    v = upgrade_verdict(_facts([member_bytes(), member_bytes(endpoint="h2:7001")]), Settings())
    assert v.verdict == READY
    assert "nothing blocks" in v.reason and "online" in v.reason
    checks = {c.name: c for c in v.details}
    assert checks["streams-conversion"].status == "ok"
    assert checks["streams-online-conversion"].status == "ok"
    assert "custom-assignor" not in checks  # the consumer-group rule does not judge a Streams group
    assert v.fix is not None and "one at a time" in v.fix


def test_check_upgrade_names_what_blocks() -> None:
    v = upgrade_verdict(_facts([member_bytes(), member_bytes(topics=("x",))]), Settings())
    assert v.verdict == NOT_READY and "different topologies" in v.reason
    assert "streams-conversion" not in {c.name for c in v.details}


def test_migration_view_shows_tasks_and_the_streams_way_forward() -> None:
    members = []
    for i, endpoint in enumerate(("h1:7001", "h2:7001")):
        meta, assignment = member_bytes(endpoint=endpoint)
        members.append(
            Member(
                f"m{i}",
                "app-StreamThread-1-consumer",
                "/h",
                protocol="classic",
                assignor="stream",
                assignment={"words-in": [i]},
                user_data=True,
                metadata=meta,
                raw_assignment=assignment,
            )
        )
    group = Group(
        "app", True, "Stable", "classic", "consumer", "stream", None, None, None, members, "DescribeGroups"
    )
    obs = Observation(0.0, group, {}, None)
    tracker = Tracker()
    tracker.observe(obs)
    rep = report(obs, tracker, 30)
    assert rep["kafka_streams"]["convertible"] is True
    assert [m["endpoint"] for m in rep["kafka_streams"]["members"]] == ["h1:7001", "h2:7001"]
    assert rep["conversion"]["direction"] is None  # not the consumer-group upgrade
    text = render(rep, Style(False))
    assert "endpoint h1:7001  active 0:[1] 1:[1]  standby 1:[0]" in text
    assert "CONSUMER-ID" not in text and "group.protocol=consumer" not in text
    assert "does not convert classic Streams groups online yet" in rep["next_step"]


def test_check_upgrade_from_records_reads_the_streams_bytes() -> None:
    """`check upgrade --data-dir/--log-dir`: the GroupMetadata record's member subscription and
    assignment are the same Streams bytes (here a Kafka Streams 3.9.2 instance's real ones)."""
    from tests.test_streams_classic_protocol import REAL_ASSIGNMENT, REAL_METADATA

    member = GroupMemberMetadata(
        "m1", None, "wordcount-classic-1-StreamThread-1-consumer", "/127.0.0.1", 300000, 45000,
        REAL_METADATA, REAL_ASSIGNMENT,
    )  # fmt: skip
    value = GroupMetadataValue("consumer", 3, "stream", "m1", 0, (member,))
    facts = facts_from_records([CoordinatorRecord(GroupMetadataKey("wordcount-classic"), value)])
    g = facts["wordcount-classic"]
    assert g.members[0].streams_metadata == REAL_METADATA
    v = upgrade_verdict(g, Settings())
    checks = {c.name: c for c in v.details}
    assert checks["streams-conversion"].status == "ok"
    assert "SubscriptionInfo version 11" in checks["streams-conversion"].reason


def test_fleet_row_counts_a_classic_streams_groups_tasks() -> None:
    """The fleet's facts row of a classic Kafka Streams group: marked Kafka Streams, its active
    tasks counted from each member's AssignmentInfo (two each here); a plain classic group is
    not."""
    from tools.fleet.judge import streams_columns

    row = streams_columns(_facts([member_bytes(), member_bytes(endpoint="h2:7001")]))
    assert row == {"kafka_streams": True, "state": None, "tasks": 4}
    assert streams_columns(_facts([], protocol="stream")) == {
        "kafka_streams": True,
        "state": "Empty",
        "tasks": 0,
    }
    plain = GroupFacts(group="g", type="classic", protocol_type="consumer", protocol="range")
    assert streams_columns(plain) == {"kafka_streams": False, "state": None, "tasks": None}

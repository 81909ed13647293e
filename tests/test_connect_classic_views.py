"""A classic Kafka Connect group in the tools (tools/groups/connect_classic.py) and in `check
upgrade` (tools/check/rules.py, translation/connect_conversion_rules.py): what a worker runs from
its allocation and the leader's delta, each blocker's reason, and the verdict, from bytes laid
out as Connect writes them (translation/connect_classic_protocol.build_assignment, checked
against Kafka's classes in e2e/test_connect_protocol_kafka.py). The real cluster's bytes are
checked in e2e/test_connect_runtime.py."""

from __future__ import annotations

from tools.check.facts import GroupFacts, MemberFacts
from tools.check.rules import NOT_READY, READY, Settings, upgrade_verdict
from tools.groups.connect_classic import decode_worker, render_lines, view_of
from tools.groups.snapshot import Group, Member
from translation.connect_classic_protocol import (
    ConnectWorkerMetadata,
    build_assignment,
    encode_assignment,
    encode_metadata,
)


def metadata(
    url: str, version: int = 2, connectors: tuple[str, ...] = (), tasks: tuple[tuple[str, int], ...] = ()
) -> bytes:
    allocation = None
    if version and (connectors or tasks):
        allocation = build_assignment(version, "m1", "http://w1/", 5, connectors, tasks)
    return encode_metadata(ConnectWorkerMetadata(version, url, 5, allocation))


def assignment(
    version: int = 2, connectors=(), tasks=(), revoked=(), revoked_tasks=(), error: int = 0
) -> bytes:  # type: ignore[no-untyped-def]
    return encode_assignment(
        build_assignment(
            version, "m1", "http://w1/", 5, connectors, tasks, revoked, revoked_tasks, error=error
        )
    )


def test_an_incremental_worker_runs_its_allocation_minus_revoked_plus_assigned() -> None:
    w = decode_worker(
        "m2",
        "connect-w2",
        "/h",
        None,
        metadata("http://w2/", 2, ("a", "b"), (("a", 0), ("b", 1))),
        assignment(2, ("c",), (("c", 0),), ("b",), (("b", 1),)),
    )
    assert w.decode_error is None and w.url == "http://w2/" and w.config_offset == 5
    assert w.connectors == ("a", "c") and w.tasks == ("a-0", "c-0")
    assert w.revoked_connectors == ("b",) and w.revoked_tasks == ("b-1",)
    assert w.leader == "m1" and w.leader_url == "http://w1/"


def test_an_eager_worker_runs_its_whole_assignment() -> None:
    w = decode_worker(
        "m", "c", "/h", None, metadata("http://w/", 0), assignment(0, ("x",), (("x", 0), ("x", 1)))
    )
    assert w.metadata_version == 0 and w.connectors == ("x",) and w.tasks == ("x-0", "x-1")


def test_bytes_that_do_not_decode_are_kept_as_the_reason() -> None:
    w = decode_worker("m", "c", "/h", None, b"\x00\x01connect", None)
    assert w.decode_error is not None and "Kafka Connect worker metadata" in w.decode_error


def group(protocol: str, members: list[Member]) -> Group:
    return Group(
        "cc", True, "Stable", "classic", "connect", protocol, None, None, None, members, "DescribeGroups"
    )


def member(i: int, meta: bytes, assign: bytes) -> Member:
    return Member(f"m{i}", f"connect-w{i}", "/h", metadata=meta, raw_assignment=assign)


def test_a_sessioned_group_has_no_blocker_and_is_convertible() -> None:
    view = view_of(
        group(
            "sessioned",
            [
                member(1, metadata("http://w1/"), assignment(2, ("a",), (("a", 0),))),
                member(2, metadata("http://w2/"), assignment(2, (), (("a", 1),))),
            ],
        )
    )
    assert view is not None and view.blockers == [] and view.leader == ("m1", "http://w1/")
    doc = view.to_json()
    assert doc["convertible"] is True and doc["conversion_built"] is True
    lines = render_lines(doc)
    assert "nothing in the group blocks it" in lines[-1]
    assert not any("does not convert" in line for line in lines)


def test_each_blocker_says_why() -> None:
    members = [
        member(1, metadata("http://w1/", 0), assignment(0, ("a",), (("a", 0),), error=1)),
        member(2, metadata("http://w2/", 0), assignment(0, ("a",))),
        member(3, b"\x00\x01x", b""),
        member(4, metadata("http://w4/", 3), b""),
    ]
    view = view_of(group("default", members))
    assert view is not None
    names = [n for n, _ in view.blockers]
    assert names == [
        "connect-sub-protocol",
        "connect-metadata",  # workers in URL order: m3 has none
        "connect-assignment-error",
        "connect-version",
        "connect-overlap",
    ], view.blockers
    reasons = dict(view.blockers)
    assert "eager protocol" in reasons["connect-sub-protocol"]
    assert "CONFIG_MISMATCH" in reasons["connect-assignment-error"]
    assert "newer than the 2" in reasons["connect-version"]
    assert reasons["connect-overlap"].startswith("a is run by 2 workers at once (m1, m2)")
    other = view_of(group("custom", [member(1, metadata("http://w1/"), b"")]))
    assert other is not None and other.blockers[0][0] == "connect-sub-protocol"
    assert "none of Connect's sub-protocols" in other.blockers[0][1]


def test_a_connect_group_on_the_new_protocol_is_not_a_classic_connect_group() -> None:
    g = group("incremental", [member(1, b"\x00\x00\x00\x01", b"")])
    g.group_type = "connect"
    assert view_of(g) is None


DEFAULTS = Settings()


def facts(protocol: str, *meta: tuple[bytes, bytes]) -> GroupFacts:
    return GroupFacts(
        group="cc",
        type="classic",
        protocol_type="connect",
        protocol=protocol,
        members=tuple(
            MemberFacts(f"m{i}", f"connect-w{i}", connect_metadata=m, connect_assignment=a)
            for i, (m, a) in enumerate(meta)
        ),
    )


def test_check_upgrade_of_a_sessioned_group_says_it_converts_when_an_sdk_worker_joins() -> None:
    v = upgrade_verdict(
        facts("sessioned", (metadata("http://w1/"), assignment(2, ("a",), (("a", 0),)))), DEFAULTS
    )
    assert v.verdict == READY
    assert v.reason == "classic Kafka Connect group: converts when an SDK worker joins"
    status = {c.name: c.status for c in v.details}
    assert status == {
        "protocol-type": "refused",  # a consumer-protocol member joining is refused
        "connect-conversion": "ok",
        "connect-online-conversion": "ok",
    }
    assert v.kafka_message is not None and "does not use the consumer embedded protocol" in v.kafka_message


def test_check_upgrade_of_an_eager_group_names_the_sub_protocol_first() -> None:
    v = upgrade_verdict(facts("default", (metadata("http://w1/", 0), assignment(0, ("a",)))), DEFAULTS)
    assert v.verdict == NOT_READY and "eager protocol" in v.reason and not v.reason.endswith("more)")
    status = {c.name: c.status for c in v.details}
    assert status["connect-sub-protocol"] == "refused" and "connect-conversion" not in status
    assert status["connect-online-conversion"] == "refused"
    assert v.fix is not None and "connect.protocol=sessioned" in v.fix

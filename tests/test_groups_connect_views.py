"""`groupshift groups list` / `describe` of connect groups (tools/groups/connect_group.py) without
a server: which ListGroups entries are connect groups, and the workers decoded from what the
engine's DescribeGroups carries (engine/connect/describe.py). e2e/test_connect_worker.py runs the
same code against a live server with SDK workers."""

from __future__ import annotations

from typing import Any

from engine.connect.describe import member_metadata
from protocol import connect_wire as cw
from tools.groups.connect_group import is_connect_group, members_table, worker_of, workers_of
from tools.groups.list_groups import TYPES, listed_kind, type_matches
from tools.groups.output import Style
from tools.groups.snapshot import Group, Member


def entry(protocol_type: str, group_type: str | None) -> dict[str, Any]:
    return {"group": "g", "protocol_type": protocol_type, "type": group_type, "state": "Stable"}


def test_a_connect_group_is_listed_by_its_type_and_a_classic_connect_cluster_is_not() -> None:
    assert "connect" in TYPES
    assert listed_kind(entry("connect", "Connect")) == "connect"
    assert listed_kind(entry("connect", "Classic")) is None  # distributed workers on JoinGroup
    assert listed_kind(entry("connect", None)) is None  # ListGroups < v5 cannot tell the two
    assert type_matches(entry("connect", "Connect"), ["connect"])
    assert not type_matches(entry("connect", "Connect"), ["classic", "consumer"])


def connect_described(members: list[Member], protocol_type: str = "connect") -> Group:
    return Group(
        "cg", True, "Stable", "classic", protocol_type, "incremental", None, None, None, members, "t"
    )


def worker_member(mid: str, url: str, work: cw.WireWork, epoch: int = 4, offset: int = 12) -> Member:
    return Member(
        mid,
        "w-" + mid,
        "/10.0.0.1",
        metadata=member_metadata(url, offset, epoch),
        raw_assignment=cw.write_work(work),
    )


def test_workers_are_decoded_from_the_engines_describe_shape() -> None:
    work = cw.WireWork(("s1",), (cw.WireTask("s1", 0), cw.WireTask("s2", 3)))
    group = connect_described([worker_member("a", "http://a:8083", work), Member("b", "w-b", "/h")])
    a, b = workers_of(group)
    assert (a.url, a.member_epoch, a.config_offset) == ("http://a:8083", 4, 12)
    assert (a.connectors, a.tasks) == (("s1",), ("s1-0", "s2-3"))
    assert (b.url, b.connectors, b.tasks, b.decode_error) == (None, (), (), None)  # joined, nothing yet
    text = members_table(group, [a, b], verbose=True, style=Style(False))
    header, row_a, row_b = text.splitlines()
    assert header.split() == [
        "GROUP", "WORKER-ID", "HOST", "CLIENT-ID", "URL", "#CONNECTORS", "#TASKS",
        "EPOCH", "CONFIG-OFFSET", "CONNECTORS", "TASKS",
    ]  # fmt: skip
    assert row_a.split() == [
        "cg",
        "a",
        "/10.0.0.1",
        "w-a",
        "http://a:8083",
        "1",
        "2",
        "4",
        "12",
        "s1",
        "s1-0,s2-3",
    ]
    assert row_b.split()[4:7] == ["-", "0", "0"]


def test_bytes_that_do_not_parse_are_reported_not_raised() -> None:
    short = worker_of("a", "c", "/h", b"\x00\x01", None)
    assert short.decode_error and short.url is None
    bad_work = worker_of("a", "c", "/h", member_metadata("u", 1, 1), b"\x05\x01")
    assert bad_work.decode_error and bad_work.url == "u" and bad_work.tasks == ()
    not_utf8 = worker_of("a", "c", "/h", member_metadata("u", 1, 1) + b"\xff", None)
    assert not_utf8.decode_error


class ListingAdmin:
    """The one call `is_connect_group` makes: ListGroups filtered on type Connect."""

    def __init__(self, listed: list[dict[str, Any]]) -> None:
        self.listed = listed
        self.calls: list[tuple[Any, Any]] = []

    def list_groups(self, states: Any = (), types: Any = ()) -> list[dict[str, Any]]:
        self.calls.append((tuple(states), tuple(types)))
        return [g for g in self.listed if not types or g["type"] in types]


def test_only_a_group_listgroups_calls_connect_is_a_connect_group() -> None:
    new = ListingAdmin([{**entry("connect", "Connect"), "group": "cg"}])
    assert is_connect_group(new, connect_described([]))  # type: ignore[arg-type]
    assert new.calls == [((), ("Connect",))]
    classic = ListingAdmin([{**entry("connect", "Classic"), "group": "cg"}])
    assert not is_connect_group(classic, connect_described([]))  # type: ignore[arg-type]
    consumer = ListingAdmin([])
    assert not is_connect_group(consumer, connect_described([], "consumer"))  # type: ignore[arg-type]
    assert consumer.calls == [], "only protocol type connect costs a ListGroups"

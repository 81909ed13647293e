"""Differential: the group admin APIs against a real Apache Kafka 4.x node and groupshift with the
same settings: ListGroups v0-v5 (KIP-518 states filter, KIP-848 types filter), DescribeGroups
v0-v5 (KIP-430 authorized operations), DeleteGroups, DescribeConfigs and IncrementalAlterConfigs
on GROUP resources (KIP-848 dynamic group configs), FindCoordinator v0-v6 (KIP-699 batching) and
the group API version ranges of ApiVersions.

The shared pair holds other tests' groups too, so listings keep only the scenario's own groups.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from e2e.differential import Session, compare, plain, run_both
from e2e.differential_classic import coordinator_loaded, join, member_id, sync
from e2e.test_differential_offsets import cgh, commit, partitions

pytestmark = pytest.mark.e2e

GROUP_RESOURCE = 32
SESSION = "consumer.session.timeout.ms"
HEARTBEAT = "consumer.heartbeat.interval.ms"


def classic_group(s: Session, name: str) -> str:
    """A stable classic group with one member; returns its member id."""
    g = s.group(name)
    mid = member_id(s, group_id=g)
    r = join(s, group_id=g, member_id=mid)
    sync(s, r.generation_id, mid, group_id=g, assignments=[{"member_id": mid, "assignment": b"a"}])
    return mid


def simple_group(s: Session, name: str) -> None:
    """An empty classic group holding offsets (a generation -1 commit)."""
    commit(s, 9, [{"name": s.topic(), "partitions": partitions((0, 1))}], group=s.group(name))


def consumer_group(s: Session, name: str) -> str:
    mid = str(uuid.uuid4())
    r = cgh(s, group_id=s.group(name), member_id=mid)
    assert r.error_code.name == "none", r
    return mid


def mixed_groups(s: Session) -> None:
    s.create_topic(s.topic(), 2)
    coordinator_loaded(
        s, *(s.group(n) for n in ("classic", "simple", "simple2", "simple3", "consumer", "missing"))
    )
    classic_group(s, "classic")
    simple_group(s, "simple")
    consumer_group(s, "consumer")


def own_groups(s: Session, r: Any) -> list[Any]:
    mine = set(s.names.values())
    return sorted((g for g in plain(r)["groups"] if g["group_id"] in mine), key=lambda g: g["group_id"])


def by_group_id(r: Any, key: str = "groups", gid: str = "group_id") -> Any:
    """An answer with its groups sorted by id: Kafka answers the groups of one request grouped by
    coordinator partition in hash-map order, groupshift in request order (docs/deviations.md)."""
    out = plain(r)
    out[key] = sorted(out[key], key=lambda g: g[gid])
    return out


def list_groups(
    s: Session, version: int, states: list[str] | None = None, types: list[str] | None = None
) -> Any:
    r = s.raw(16, version, states_filter=states or [], types_filter=types or [])
    return {"error_code": plain(r)["error_code"], "groups": own_groups(s, r)}


# -- scenarios --------------------------------------------------------------------------------------


def scenario_list_groups_versions_and_filters(s: Session) -> None:
    mixed_groups(s)
    for v in range(6):
        s.note(f"ListGroups v{v}", list_groups(s, v))
    s.note("ListGroups v4 Stable", list_groups(s, 4, ["Stable"]))
    s.note("ListGroups v4 Empty", list_groups(s, 4, ["Empty"]))
    s.note("ListGroups v4 stable (lower case)", list_groups(s, 4, ["stable"]))
    s.note("ListGroups v4 unknown state", list_groups(s, 4, ["Sleeping"]))
    s.note("ListGroups v5 classic", list_groups(s, 5, types=["classic"]))
    s.note("ListGroups v5 consumer", list_groups(s, 5, types=["consumer"]))
    s.note("ListGroups v5 Consumer (capitalised)", list_groups(s, 5, types=["Consumer"]))
    s.note("ListGroups v5 share", list_groups(s, 5, types=["share"]))
    s.note("ListGroups v5 unknown type", list_groups(s, 5, types=["bogus"]))
    s.note("ListGroups v5 classic Empty", list_groups(s, 5, ["Empty"], ["classic"]))
    s.note("ListGroups v5 Stable consumer", list_groups(s, 5, ["Stable"], ["consumer"]))


def scenario_describe_classic_groups(s: Session) -> None:
    mixed_groups(s)
    groups = [s.group("classic"), s.group("simple"), s.group("missing")]
    for v in range(7):
        fields: dict[str, Any] = {"groups": groups, "include_authorized_operations": False}
        s.note(f"DescribeGroups v{v}", by_group_id(s.raw(15, v, **fields)))
    s.note("DescribeGroups v5 empty group id", s.raw(15, 5, groups=[""], include_authorized_operations=False))


def scenario_describe_groups_authorized_operations(s: Session) -> None:
    """KIP-430: without an authorizer Kafka answers every operation a GROUP supports."""
    mixed_groups(s)
    for v in (3, 5, 6):
        s.note(
            f"DescribeGroups v{v} authorized operations",
            by_group_id(
                s.raw(
                    15, v, groups=[s.group("classic"), s.group("missing")], include_authorized_operations=True
                )
            ),
        )


def scenario_describe_consumer_group(s: Session) -> None:
    """Kafka answers a consumer group as Dead to DescribeGroups; groupshift deliberately
    answers the classic shape (docs/deviations.md)."""
    mixed_groups(s)
    r = s.raw(15, 5, groups=[s.group("consumer")], include_authorized_operations=False)
    (g,) = plain(r)["groups"]
    s.note(
        "DescribeGroups v5 consumer group", {k: g[k] for k in ("error_code", "group_state", "protocol_type")}
    )


def scenario_delete_groups(s: Session) -> None:
    mixed_groups(s)
    simple_group(s, "simple2")
    simple_group(s, "simple3")
    names = [s.group("classic"), s.group("simple"), s.group("missing"), s.group("consumer")]
    s.note("DeleteGroups v2", by_group_id(s.raw(42, 2, groups_names=names), "results"))
    s.note("DeleteGroups v0", s.raw(42, 0, groups_names=[s.group("simple2"), s.group("simple2")]))
    s.note("DeleteGroups v1", s.raw(42, 1, groups_names=[s.group("simple3")]))
    s.note("ListGroups", list_groups(s, 5))
    s.note(
        "OffsetFetch deleted",
        s.raw(9, 1, group_id=s.group("simple"), topics=[{"name": s.topic(), "partition_indexes": [0]}]),
    )


def scenario_delete_group_after_members_leave(s: Session) -> None:
    s.create_topic(s.topic(), 1)
    coordinator_loaded(s, s.group("classic"), s.group("consumer"))
    mid = classic_group(s, "classic")
    s.note(
        "LeaveGroup",
        s.raw(
            13,
            5,
            group_id=s.group("classic"),
            members=[{"member_id": mid, "group_instance_id": None, "reason": None}],
        ),
    )
    cmid = consumer_group(s, "consumer")
    s.note(
        "ConsumerGroupHeartbeat leave",
        cgh(s, group_id=s.group("consumer"), member_id=cmid, member_epoch=-1).error_code,
    )
    s.note(
        "DeleteGroups",
        by_group_id(s.raw(42, 2, groups_names=[s.group("classic"), s.group("consumer")]), "results"),
    )
    s.note("DescribeGroups", s.raw(15, 5, groups=[s.group("classic")], include_authorized_operations=False))


def describe_configs(s: Session, group: str, keys: list[str] | None, version: int = 4) -> Any:
    return s.raw(
        32,
        version,
        resources=[{"resource_type": GROUP_RESOURCE, "resource_name": group, "configuration_keys": keys}],
        include_synonyms=False,
        include_documentation=False,
    )


def alter_configs(
    s: Session, group: str, configs: list[tuple[str, int, str | None]], validate_only: bool = False
) -> Any:
    return s.raw(
        44,
        1,
        resources=[
            {
                "resource_type": GROUP_RESOURCE,
                "resource_name": group,
                "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in configs],
            }
        ],
        validate_only=validate_only,
    )


def scenario_group_configs(s: Session) -> None:
    """Describe and alter the consumer group configs of a group, within and outside the
    broker's bounds (`group.consumer.min/max.session.timeout.ms`, `...heartbeat.interval.ms`)."""
    s.wait_coordinator(s.group())
    g = s.group()
    for v in (1, 4):
        s.note(f"DescribeConfigs v{v}", describe_configs(s, g, [SESSION, HEARTBEAT], v))
    s.note(
        "IncrementalAlterConfigs set", alter_configs(s, g, [(SESSION, 0, "50000"), (HEARTBEAT, 0, "6000")])
    )
    s.note("DescribeConfigs after set", describe_configs(s, g, [SESSION, HEARTBEAT]))
    s.note("IncrementalAlterConfigs session too low", alter_configs(s, g, [(SESSION, 0, "1000")]))
    s.note("IncrementalAlterConfigs session too high", alter_configs(s, g, [(SESSION, 0, "60001")]))
    s.note("IncrementalAlterConfigs heartbeat too low", alter_configs(s, g, [(HEARTBEAT, 0, "10")]))
    s.note("IncrementalAlterConfigs heartbeat too high", alter_configs(s, g, [(HEARTBEAT, 0, "15001")]))
    s.note("IncrementalAlterConfigs not a number", alter_configs(s, g, [(SESSION, 0, "soon")]))
    s.note("IncrementalAlterConfigs unknown name", alter_configs(s, g, [("consumer.nap.ms", 0, "1")]))
    s.note("IncrementalAlterConfigs validate only", alter_configs(s, g, [(SESSION, 0, "55000")], True))
    s.note("DescribeConfigs after validate only", describe_configs(s, g, [SESSION]))
    s.note("IncrementalAlterConfigs delete", alter_configs(s, g, [(SESSION, 1, None)]))
    s.note("DescribeConfigs after delete", describe_configs(s, g, [SESSION, HEARTBEAT]))


def scenario_group_configs_all_names(s: Session) -> None:
    """DescribeConfigs of a GROUP without keys: every group config the broker knows."""
    s.wait_coordinator(s.group())
    r = plain(describe_configs(s, s.group(), None))
    (res,) = r["results"]
    s.note("DescribeConfigs(all) error", res["error_code"])
    s.note("DescribeConfigs(all) names", sorted(c["name"] for c in res["configs"]))


def scenario_find_coordinator_versions(s: Session) -> None:
    s.wait_coordinator(s.group())
    for v in range(4):
        s.note(f"FindCoordinator v{v}", s.raw(10, v, key=s.group(), key_type=0))
    for v in (4, 5, 6):
        s.note(
            f"FindCoordinator v{v} batch",
            s.raw(10, v, key_type=0, coordinator_keys=[s.group(), s.group("b")]),
        )
    s.note("FindCoordinator v6 empty key", s.raw(10, 6, key_type=0, coordinator_keys=[""]))


def scenario_find_coordinator_key_types(s: Session) -> None:
    """key_type 1 is a transactional id's coordinator; others are invalid."""
    s.wait_coordinator(s.group())
    # Kafka creates its transaction state topic on the first lookup and answers
    # COORDINATOR_NOT_AVAILABLE until then; wait for that (unrecorded) so the answers compare.
    deadline = time.monotonic() + 30
    while s.raw(10, 4, key_type=1, coordinator_keys=["txn-probe"]).coordinators[0].error_code.name != "none":
        assert time.monotonic() < deadline, f"{s.backend}: no transaction coordinator"
        time.sleep(0.2)
    s.note("FindCoordinator v3 txn", s.raw(10, 3, key="txn-" + s.names["run"], key_type=1))
    s.note("FindCoordinator v4 txn", s.raw(10, 4, key_type=1, coordinator_keys=["txn-" + s.names["run"]]))
    s.note("FindCoordinator v3 bad type", s.raw(10, 3, key=s.group(), key_type=7))
    s.note("FindCoordinator v6 bad type", s.raw(10, 6, key_type=7, coordinator_keys=[s.group()]))


# Group coordinator APIs whose ranges must agree: OffsetCommit, OffsetFetch, FindCoordinator,
# JoinGroup, Heartbeat, LeaveGroup, SyncGroup, DescribeGroups, ListGroups, DeleteGroups,
# OffsetDelete, ConsumerGroupHeartbeat, ConsumerGroupDescribe.
GROUP_APIS = (8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47, 68, 69)


def scenario_api_versions_group_apis(s: Session) -> None:
    r = plain(s.raw(18, 3, client_software_name="groupshift-e2e", client_software_version="1.0"))
    ranges = {k["api_key"]: [k["min_version"], k["max_version"]] for k in r["api_keys"]}
    s.note("ApiVersions group APIs", {str(k): ranges.get(k, "<absent>") for k in GROUP_APIS})


SCENARIOS: list[Callable[[Session], None]] = [
    scenario_list_groups_versions_and_filters,
    scenario_describe_classic_groups,
    scenario_describe_groups_authorized_operations,
    scenario_describe_consumer_group,
    scenario_delete_groups,
    scenario_delete_group_after_members_leave,
    scenario_group_configs,
    scenario_group_configs_all_names,
    scenario_find_coordinator_versions,
    scenario_find_coordinator_key_types,
    scenario_api_versions_group_apis,
]
KNOWN: dict[str, dict[str, str]] = {
    "scenario_group_configs_all_names": {
        r"DescribeConfigs\(all\) names": "6 of Kafka's group configs are served (deviations.md)",
    },
    "scenario_api_versions_group_apis": {
        r"ApiVersions group APIs#0\.(8|9)\[1\]": "OffsetCommit/OffsetFetch v10 (topic ids) not served",
    },
    "scenario_describe_consumer_group": {
        r"DescribeGroups v5 consumer group#\d+\.(group_state|protocol_type)": "classic shape (deviations.md)",
    },
}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[f.__name__.removeprefix("scenario_") for f in SCENARIOS])
def test_admin(scenario: Callable[[Session], None], differential_pair: tuple[str, str]) -> None:
    compare(run_both(scenario, *differential_pair), KNOWN.get(scenario.__name__, {}))


def test_groupshift_answers_groups_in_request_order(differential_pair: tuple[str, str]) -> None:
    """Kafka answers the groups of one DescribeGroups/DeleteGroups/OffsetFetch request grouped by
    coordinator partition in hash-map order; groupshift keeps the request's order (clients match
    answers by group id; docs/deviations.md). The scenarios above sort; this pins our order."""
    from protocol.client import WireClient, make_request

    run = uuid.uuid4().hex[:10]
    names = [f"{c}-{run}" for c in "zyxwvutsrq"]
    with WireClient(int(differential_pair[1].rsplit(":", 1)[1]), timeout=30.0) as c:
        r = c.request(make_request(15, 5, groups=names, include_authorized_operations=False))
        assert [g.group_id for g in r.groups] == names
        r = c.request(make_request(42, 2, groups_names=names))
        assert [g.group_id for g in r.results] == names
        r = c.request(
            make_request(
                9,
                9,
                groups=[
                    {"group_id": n, "member_id": None, "member_epoch": -1, "topics": None} for n in names
                ],
                require_stable=False,
            )
        )
        assert [g.group_id for g in r.groups] == names

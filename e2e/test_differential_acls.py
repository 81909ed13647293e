"""Differential: authorization against a real Apache Kafka 4.4 node (KRaft, SASL_SSL listener,
StandardAuthorizer, `super.users=User:admin`) and groupshift with a SASL_SSL listener, the same
PLAIN users (principals `User:<name>`) and the same ACLs (e2e/secured_pair.py), answer by
answer: every group and offset API allowed, denied, through a PREFIXED ACL, with a DENY that wins
and with no ACL at all; the ACL APIs (filters, invalid
bindings, who may call them); KIP-430 authorized-operations bits; ListGroups filtering;
ConsumerGroupHeartbeat's topic authorization and regex resolution; Metadata, produce and config
APIs on topics the principal may not see.

Each scenario sets its ACLs up as `admin` (the CreateAcls answers are compared too), then speaks
as `alice`, `bob` or `carol` (each a PLAIN login over TLS). Names carry the run's id, so
scenarios never see each other's ACLs except cluster-level ones, which a scenario deletes before
it ends.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.differential import Session, compare, plain, run_both
from e2e.secured_pair import SaslPair, sasl_pair

pytestmark = pytest.mark.e2e

TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
ANY_TYPE, MATCH, LITERAL, PREFIXED, ANY_PATTERN = 1, 2, 3, 4, 1
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
DESCRIBE_CONFIGS, ALTER_CONFIGS = 10, 11
ALLOW, DENY, ANY = 3, 2, 1


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslPair]:
    yield from sasl_pair(Path(tmp_path_factory.mktemp("acl-differential")))


def binding(
    rtype: int,
    name: str,
    principal: str,
    op: int,
    perm: int = ALLOW,
    pattern: int = LITERAL,
    host: str = "*",
) -> dict[str, Any]:
    return {
        "resource_type": rtype,
        "resource_name": name,
        "resource_pattern_type": pattern,
        "principal": principal,
        "host": host,
        "operation": op,
        "permission_type": perm,
    }


def acl_filter(
    rtype: int = ANY_TYPE,
    name: str | None = None,
    pattern: int = ANY_PATTERN,
    principal: str | None = None,
    op: int = ANY,
    perm: int = ANY,
    host: str | None = None,
) -> dict[str, Any]:
    return {
        "resource_type_filter": rtype,
        "resource_name_filter": name,
        "pattern_type_filter": pattern,
        "principal_filter": principal,
        "host_filter": host,
        "operation": op,
        "permission_type": perm,
    }


def describe_sorted(s: Session, label: str, **f: Any) -> Any:
    """DescribeAcls, its resources and entries sorted (Kafka groups them in a hash map)."""
    r = plain(s.raw(29, 3, **acl_filter(**f)))
    for res in r["resources"]:
        res["acls"].sort(key=lambda a: (a["principal"], a["host"], a["operation"], a["permission_type"]))
    r["resources"].sort(key=lambda x: (x["resource_type"], x["resource_name"], x["pattern_type"]))
    s.note(label, r)
    return r


def grant(s: Session, *bindings: dict[str, Any], label: str = "create_acls") -> None:
    """CreateAcls as admin (answer recorded); then wait until the node authorizes with them
    (Kafka's broker applies them when it replays the metadata log)."""
    s.use("admin")
    s.call(30, 3, label, creations=list(bindings))
    wait_applied(s, bindings, present=True)


def wait_applied(s: Session, bindings: Any, *, present: bool) -> None:
    deadline = time.monotonic() + 20
    for b in bindings:
        while True:
            r = plain(
                s.raw(
                    29,
                    3,
                    **acl_filter(
                        b["resource_type"],
                        b["resource_name"],
                        b["resource_pattern_type"],
                        b["principal"],
                        b["operation"],
                        b["permission_type"],
                        b["host"],
                    ),
                )
            )
            if bool(r["resources"]) == present or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    if s.backend == "kafka":
        time.sleep(0.2)  # DescribeAcls and the authorizer read the same image; a margin anyway


def revoke(s: Session, *bindings: dict[str, Any]) -> None:
    """DeleteAcls of exactly these bindings as admin (not recorded)."""
    s.use("admin")
    s.raw(
        31,
        3,
        filters=[
            acl_filter(
                b["resource_type"],
                b["resource_name"],
                b["resource_pattern_type"],
                b["principal"],
                b["operation"],
                b["permission_type"],
                b["host"],
            )
            for b in bindings
        ],
    )
    wait_applied(s, bindings, present=False)


def topic(s: Session, name: str = "t", partitions: int = 2) -> str:
    """A topic created by admin, ready on both."""
    s.use("admin")
    t = s.topic(name)
    s.create_topic(t, partitions)
    return t


def coordinator_ready(s: Session, group: str) -> None:
    """The group's coordinator found and loaded (right after the node starts, Kafka answers
    NOT_COORDINATOR for a while after FindCoordinator succeeds)."""
    s.use("admin")
    s.wait_coordinator(group)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = plain(s.raw(15, 5, groups=[group], include_authorized_operations=False))
        if r["groups"][0]["error_code"] not in (
            "not_coordinator",
            "coordinator_load_in_progress",
            "coordinator_not_available",
        ):
            return
        time.sleep(0.2)


# --- request helpers ------------------------------------------------------------------------------


def join(s: Session, group: str, label: str = "join") -> Any:
    return s.call(
        11,
        9,
        label,
        group_id=group,
        session_timeout=10000,
        rebalance_timeout=10000,
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"}],
        reason=None,
    )


def sync(s: Session, group: str, label: str = "sync") -> Any:
    return s.call(
        14,
        5,
        label,
        group_id=group,
        generation_id=1,
        member_id="nobody",
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[],
    )


def heartbeat(s: Session, group: str, label: str = "heartbeat") -> Any:
    return s.call(12, 4, label, group_id=group, generation_id=1, member_id="nobody", group_instance_id=None)


def leave(s: Session, group: str, label: str = "leave") -> Any:
    return s.call(
        13,
        5,
        label,
        group_id=group,
        members=[{"member_id": "nobody", "group_instance_id": None, "reason": None}],
    )


def commit(s: Session, group: str, topics: list[str], label: str = "commit", version: int = 9) -> Any:
    return s.call(
        8,
        version,
        label,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time=-1,
        topics=[
            {
                "name": t,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": 5 + p,
                        "committed_leader_epoch": -1,
                        "commit_timestamp": -1,
                        "committed_metadata": "m",
                    }
                    for p in (0, 1)
                ],
            }
            for t in topics
        ],
    )


def fetch_offsets(s: Session, groups: list[tuple[str, list[str] | None]], label: str = "offset_fetch") -> Any:
    return s.call(
        9,
        9,
        label,
        groups=[
            {
                "group_id": g,
                "member_id": None,
                "member_epoch": -1,
                "topics": None if ts is None else [{"name": t, "partition_indexes": [0, 1]} for t in ts],
            }
            for g, ts in groups
        ],
        require_stable=False,
    )


def fetch_offsets_v7(s: Session, group: str, topics: list[str] | None, label: str = "offset_fetch_v7") -> Any:
    return s.call(
        9,
        7,
        label,
        group_id=group,
        topics=None if topics is None else [{"name": t, "partition_indexes": [0, 1]} for t in topics],
        require_stable=False,
    )


def offset_delete(s: Session, group: str, topics: list[str], label: str = "offset_delete") -> Any:
    return s.call(
        47,
        0,
        label,
        group_id=group,
        topics=[{"name": t, "partitions": [{"partition_index": 0}]} for t in topics],
    )


def find_coordinator(s: Session, keys: list[str], key_type: int = 0, label: str = "find_coordinator") -> Any:
    return s.call(10, 4, label, key_type=key_type, coordinator_keys=keys)


def describe_groups(s: Session, groups: list[str], label: str = "describe_groups", ops: bool = True) -> Any:
    return s.call(15, 5, label, groups=groups, include_authorized_operations=ops)


def cg_describe(s: Session, groups: list[str], label: str = "cg_describe", ops: bool = True) -> Any:
    return s.call(69, 0, label, group_ids=groups, include_authorized_operations=ops)


def delete_groups(s: Session, groups: list[str], label: str = "delete_groups") -> Any:
    return s.call(42, 2, label, groups_names=groups)


def list_groups_seen(s: Session, prefix: str, label: str = "list_groups") -> None:
    r = plain(s.raw(16, 5, states_filter=[], types_filter=[]))
    r["groups"] = sorted(
        (g["group_id"], g["group_type"]) for g in r["groups"] if g["group_id"].startswith(prefix)
    )
    s.note(label, r)


def cgh(
    s: Session,
    group: str,
    *,
    names: list[str] | None = None,
    regex: str | None = None,
    member_id: str | None = None,
    epoch: int = 0,
    label: str = "cgh",
    record: bool = True,
) -> Any:
    fields = {
        "group_id": group,
        "member_id": member_id or str(uuid.uuid4()),
        "member_epoch": epoch,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": 30000,
        "subscribed_topic_names": names,
        "subscribed_topic_regex": regex,
        "server_assignor": "uniform",
        "topic_partitions": [] if epoch == 0 else None,
    }
    if record:
        return s.call(68, 1, label, **fields)
    return s.raw(68, 1, **fields)


def simple_commit_as_admin(s: Session, group: str, t: str) -> None:
    s.use("admin")
    s.raw(
        8,
        9,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time=-1,
        topics=[
            {
                "name": t,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": 1,
                        "committed_leader_epoch": -1,
                        "commit_timestamp": -1,
                        "committed_metadata": "",
                    }
                    for p in (0, 1)
                ],
            }
        ],
    )


# --- scenarios ------------------------------------------------------------------------------------

Scenario = Callable[[Session], None]
SCENARIOS: dict[str, Scenario] = {}
KNOWN: dict[str, dict[str, str]] = {
    "scenario_acls_need_cluster_permissions": {
        r"(create_denied|delete_denied|describe_denied|create_with_describe_only)#\d+\..*error_message": (
            "Kafka's ClusterAuthorizationException message prints its internal request object "
            "(processor, connection id, buffers); groupshift names the API (docs/deviations.md)"
        ),
    },
}


def scenario(fn: Scenario) -> Scenario:
    SCENARIOS[fn.__name__] = fn
    return fn


def _group_api_family(api: str, call: Callable[[Session, str, str], Any], op: int) -> None:
    """Five scenarios per single-group API: allowed, denied (no ACL), prefixed, deny wins,
    allowed for someone else only."""

    def allowed(s: Session) -> None:
        g = s.group(f"{api}-ok")
        coordinator_ready(s, g)
        grant(s, binding(GROUP, g, "User:alice", op))
        s.use("alice")
        call(s, g, "allowed")

    def no_acl(s: Session) -> None:
        g = s.group(f"{api}-none")
        coordinator_ready(s, g)
        s.use("alice")
        call(s, g, "no_acl")

    def prefixed(s: Session) -> None:
        g = s.group(f"{api}-pre")
        coordinator_ready(s, g)
        grant(s, binding(GROUP, g[:-3], "User:alice", op, pattern=PREFIXED))
        s.use("alice")
        call(s, g, "prefixed")

    def deny_wins(s: Session) -> None:
        g = s.group(f"{api}-deny")
        coordinator_ready(s, g)
        grant(
            s,
            binding(GROUP, g, "User:*", ALL),
            binding(GROUP, g[:-4], "User:alice", op, perm=DENY, pattern=PREFIXED),
        )
        s.use("alice")
        call(s, g, "deny_wins")
        s.use("bob")
        call(s, g, "others_allowed")

    def other_principal(s: Session) -> None:
        g = s.group(f"{api}-other")
        coordinator_ready(s, g)
        grant(s, binding(GROUP, g, "User:bob", op))
        s.use("alice")
        call(s, g, "other_principal")

    for fn, suffix in (
        (allowed, "allowed"),
        (no_acl, "no_acl"),
        (prefixed, "prefixed"),
        (deny_wins, "deny_wins"),
        (other_principal, "other_principal"),
    ):
        fn.__name__ = f"scenario_{api}_{suffix}"
        scenario(fn)


_group_api_family("join_group", lambda s, g, label: join(s, g, label), READ)
_group_api_family("sync_group", lambda s, g, label: sync(s, g, label), READ)
_group_api_family("heartbeat", lambda s, g, label: heartbeat(s, g, label), READ)
_group_api_family("leave_group", lambda s, g, label: leave(s, g, label), READ)
_group_api_family("describe_groups", lambda s, g, label: describe_groups(s, [g], label), DESCRIBE)
_group_api_family("cg_describe", lambda s, g, label: cg_describe(s, [g], label), DESCRIBE)
_group_api_family("find_coordinator", lambda s, g, label: find_coordinator(s, [g], 0, label), DESCRIBE)
_group_api_family("cgh_group", lambda s, g, label: cgh(s, g, names=[], label=label), READ)
_group_api_family("delete_groups", lambda s, g, label: delete_groups(s, [g], label), DELETE)


@scenario
def scenario_offset_commit_group_and_topics(s: Session) -> None:
    t_ok, t_no = topic(s, "oc-ok"), topic(s, "oc-no")
    g = s.group("oc")
    coordinator_ready(s, g)
    s.use("alice")
    commit(s, g, [t_ok], "group_denied")
    grant(s, binding(GROUP, g, "User:alice", READ), binding(TOPIC, t_ok, "User:alice", READ))
    s.use("alice")
    commit(s, g, [t_ok, t_no], "one_topic_denied")
    commit(s, g, [t_no], "all_topics_denied")
    commit(s, g, [t_ok], "allowed", version=2)


@scenario
def scenario_offset_commit_describe_is_not_read(s: Session) -> None:
    t = topic(s, "oc-desc")
    g = s.group("oc-desc")
    coordinator_ready(s, g)
    grant(s, binding(GROUP, g, "User:alice", DESCRIBE), binding(TOPIC, t, "User:alice", DESCRIBE))
    s.use("alice")
    commit(s, g, [t], "describe_only")


@scenario
def scenario_offset_fetch_topics_filtered(s: Session) -> None:
    t_ok, t_no = topic(s, "of-ok"), topic(s, "of-no")
    g, g2 = s.group("of"), s.group("of-denied")
    coordinator_ready(s, g)
    coordinator_ready(s, g2)
    simple_commit_as_admin(s, g, t_ok)
    simple_commit_as_admin(s, g, t_no)
    grant(s, binding(GROUP, g, "User:alice", DESCRIBE), binding(TOPIC, t_ok, "User:alice", DESCRIBE))
    s.use("alice")
    fetch_offsets(s, [(g, [t_ok, t_no]), (g2, [t_ok])], "named")
    r = plain(
        s.raw(
            9,
            9,
            groups=[{"group_id": g, "member_id": None, "member_epoch": -1, "topics": None}],
            require_stable=False,
        )
    )
    for grp in r["groups"]:
        grp["topics"].sort(key=lambda t: t["name"])
    s.note("all_topics", r)
    fetch_offsets_v7(s, g, [t_ok, t_no], "v7_named")
    fetch_offsets_v7(s, g2, None, "v7_group_denied")


@scenario
def scenario_offset_delete(s: Session) -> None:
    t_ok, t_no = topic(s, "od-ok"), topic(s, "od-no")
    g = s.group("od")
    coordinator_ready(s, g)
    simple_commit_as_admin(s, g, t_ok)
    simple_commit_as_admin(s, g, t_no)
    s.use("alice")
    offset_delete(s, g, [t_ok], "group_denied")
    grant(s, binding(GROUP, g, "User:alice", DELETE), binding(TOPIC, t_ok, "User:alice", READ))
    s.use("alice")
    offset_delete(s, g, [t_ok, t_no], "one_topic_denied")


@scenario
def scenario_delete_groups_mixed(s: Session) -> None:
    t = topic(s, "dg")
    g1, g2 = s.group("dg-a"), s.group("dg-b")
    for g in (g1, g2):
        coordinator_ready(s, g)
        simple_commit_as_admin(s, g, t)
    grant(s, binding(GROUP, g1, "User:alice", DELETE))
    s.use("alice")
    delete_groups(s, [g1, g2], "mixed")


@scenario
def scenario_find_coordinator_batched_and_transactions(s: Session) -> None:
    g1, g2 = s.group("fc-a"), s.group("fc-b")
    coordinator_ready(s, g1)
    grant(s, binding(GROUP, g1, "User:alice", READ), binding(TXN, s.group("txn"), "User:alice", DESCRIBE))
    s.use("alice")
    find_coordinator(s, [g1, g2], 0, "groups")
    find_coordinator(s, [s.group("txn-other")], 1, "txn_denied")
    s.call(10, 3, "v3_denied", key=g2, key_type=0)


@scenario
def scenario_list_groups_filtered(s: Session) -> None:
    t = topic(s, "lg")
    prefix = s.group("lg")
    groups = [f"{prefix}-{i}" for i in range(3)]
    for g in groups:
        coordinator_ready(s, g)
        simple_commit_as_admin(s, g, t)
    grant(s, binding(GROUP, groups[0], "User:alice", DESCRIBE), binding(GROUP, groups[1], "User:alice", READ))
    s.use("alice")
    list_groups_seen(s, prefix, "alice_sees_two")
    s.use("bob")
    list_groups_seen(s, prefix, "bob_sees_none")
    cluster = binding(CLUSTER, "kafka-cluster", "User:carol", DESCRIBE)
    grant(s, cluster)
    s.use("carol")
    list_groups_seen(s, prefix, "cluster_describe_sees_all")
    revoke(s, cluster)


@scenario
def scenario_authorized_operations_bits(s: Session) -> None:
    g = s.group("ops")
    t = topic(s, "ops")
    coordinator_ready(s, g)
    simple_commit_as_admin(s, g, t)
    grant(s, binding(GROUP, g, "User:alice", READ))
    s.use("alice")
    describe_groups(s, [g], "read_only")
    cg_describe(s, [g], "cg_read_only")
    grant(s, binding(GROUP, g, "User:alice", ALTER_CONFIGS), binding(GROUP, g, "User:alice", DELETE))
    s.use("alice")
    describe_groups(s, [g], "read_delete_alter_configs")
    grant(s, binding(GROUP, g, "User:bob", ALL), binding(GROUP, g, "User:bob", DELETE, perm=DENY))
    s.use("bob")
    describe_groups(s, [g], "all_but_delete")
    describe_groups(s, [g], "not_asked", ops=False)
    s.use("admin")
    describe_groups(s, [g], "super_user")


@scenario
def scenario_cgh_topic_authorization(s: Session) -> None:
    t_ok, t_no, t_no2 = topic(s, "cgh-ok"), topic(s, "cgh-no"), topic(s, "cgh-no2")
    g = s.group("cgh-topics")
    coordinator_ready(s, g)
    grant(s, binding(GROUP, g, "User:alice", READ), binding(TOPIC, t_ok, "User:alice", DESCRIBE))
    s.use("alice")
    cgh(s, g, names=[t_ok, t_no, t_no2], label="two_topics_denied")
    cgh(s, g, names=[s.topic("cgh-missing")], label="unknown_topic_denied")


@scenario
def scenario_cgh_regex_resolves_only_described_topics(s: Session) -> None:
    base = s.topic("rx")
    names = [topic(s, f"rx-{i}", partitions=1) for i in range(3)]
    g = s.group("cgh-regex")
    coordinator_ready(s, g)
    grant(
        s,
        binding(GROUP, g, "User:alice", READ),
        binding(TOPIC, names[0], "User:alice", READ),
        binding(TOPIC, names[1], "User:alice", DESCRIBE),
    )
    s.use("alice")
    mid = str(uuid.uuid4())
    # Kafka 4.4 computes the assignment in the background: heartbeat until it arrives, and
    # compare the topics assigned in the end (not each answer's timing).
    r = cgh(s, g, regex=f"rx-[0-9]-{base.rsplit('-', 1)[1]}", member_id=mid, record=False)
    s.note("joined", {"error_code": r.error_code})
    epoch = r.member_epoch
    assigned: list[str] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if r.assignment is not None:
            assigned = sorted(str(tp.topic_id) for tp in r.assignment.topic_partitions)
            if len(assigned) >= 2:
                break
        time.sleep(0.3)
        r = cgh(s, g, member_id=mid, epoch=epoch, record=False)
        epoch = r.member_epoch
    s.note("assigned_topics", sorted(s.norm(a) for a in assigned))
    s.use("admin")
    desc = plain(s.raw(69, 0, group_ids=[g], include_authorized_operations=False))
    members = desc["groups"][0]["members"]
    s.note("regex", [m["subscribed_topic_regex"] for m in members])


# --- the ACL APIs -------------------------------------------------------------------------------


@scenario
def scenario_acls_create_invalid_bindings(s: Session) -> None:
    s.use("admin")
    g = s.group("invalid")
    s.call(
        30,
        3,
        "invalid_names",
        creations=[
            binding(CLUSTER, "not-the-cluster", "User:alice", DESCRIBE),
            binding(GROUP, "", "User:alice", READ),
            binding(GROUP, g, "User:alice", READ),
        ],
    )
    wait_applied(s, [binding(GROUP, g, "User:alice", READ)], present=True)
    describe_sorted(s, "created_only_the_valid_one", name=g)


@scenario
def scenario_acls_create_unbuildable_bindings(s: Session) -> None:
    s.use("admin")
    g = s.group("unbuildable")
    for label, bad in (
        ("resource_type_any", binding(ANY_TYPE, g, "User:alice", READ)),
        ("pattern_match", binding(GROUP, g, "User:alice", READ, pattern=MATCH)),
        ("pattern_any", binding(GROUP, g, "User:alice", READ, pattern=ANY_PATTERN)),
        ("operation_any", binding(GROUP, g, "User:alice", ANY)),
        ("permission_any", binding(GROUP, g, "User:alice", READ, perm=ANY)),
    ):
        s.call(30, 3, label, creations=[bad, binding(GROUP, g, "User:bob", READ)])
    describe_sorted(s, "nothing_created", name=g, pattern=MATCH)


@scenario
def scenario_acls_odd_principals_and_hosts(s: Session) -> None:
    s.use("admin")
    g = s.group("odd")
    for label, bad in (
        ("principal_without_type", binding(GROUP, g, "alice", READ)),
        ("empty_principal", binding(GROUP, g, "", READ)),
        ("empty_host", binding(GROUP, g, "User:alice", READ, host="")),
        ("group_principal_type", binding(GROUP, g, "Group:ops", READ)),
    ):
        s.call(30, 3, label, creations=[bad])
    time.sleep(0.5)
    describe_sorted(s, "what_was_created", name=g, pattern=MATCH)
    describe_sorted(s, "filter_by_odd_principal", name=g, pattern=MATCH, principal="alice")


@scenario
def scenario_acls_describe_filters(s: Session) -> None:
    g = s.group("filters")
    grant(
        s,
        binding(GROUP, g, "User:alice", READ),
        binding(GROUP, g[:-3], "User:bob", DESCRIBE, pattern=PREFIXED),
        binding(GROUP, g, "User:carol", READ, perm=DENY, host="127.0.0.1"),
    )
    describe_sorted(s, "match", name=g, pattern=MATCH, rtype=GROUP)
    describe_sorted(s, "any_exact_name", name=g, pattern=ANY_PATTERN)
    describe_sorted(s, "literal", name=g, pattern=LITERAL)
    describe_sorted(s, "prefixed", name=g[:-3], pattern=PREFIXED)
    describe_sorted(s, "by_principal", name=g, pattern=MATCH, principal="User:carol")
    describe_sorted(s, "by_host", name=g, pattern=MATCH, host="127.0.0.1")
    describe_sorted(s, "by_op_and_perm", name=g, pattern=MATCH, op=READ, perm=DENY)
    describe_sorted(s, "topic_type_none", name=g, pattern=MATCH, rtype=TOPIC)


@scenario
def scenario_acls_delete_filters(s: Session) -> None:
    g = s.group("del")
    grant(
        s,
        binding(GROUP, g, "User:alice", READ),
        binding(GROUP, g, "User:bob", READ),
        binding(GROUP, g[:-3], "User:bob", DESCRIBE, pattern=PREFIXED),
    )
    s.use("admin")
    r = plain(
        s.raw(
            31,
            3,
            filters=[
                acl_filter(GROUP, g, LITERAL, "User:alice"),
                acl_filter(GROUP, g, LITERAL, "User:alice"),
                acl_filter(GROUP, s.group("nothing"), LITERAL),
            ],
        )
    )
    s.note("deleted", r)
    wait_applied(s, [binding(GROUP, g, "User:alice", READ)], present=False)
    r = plain(s.raw(31, 3, filters=[acl_filter(GROUP, g, MATCH, "User:bob")]))
    for fr in r["filter_results"]:
        fr["matching_acls"].sort(key=lambda a: (a["pattern_type"], a["operation"]))
    s.note("deleted_match", r)
    wait_applied(s, [binding(GROUP, g, "User:bob", READ)], present=False)
    describe_sorted(s, "left", name=g, pattern=MATCH)


@scenario
def scenario_acls_need_cluster_permissions(s: Session) -> None:
    g = s.group("who")
    s.use("alice")
    s.call(30, 3, "create_denied", creations=[binding(GROUP, g, "User:alice", READ)])
    s.call(29, 3, "describe_denied", **acl_filter(GROUP, g, MATCH))
    s.call(31, 3, "delete_denied", filters=[acl_filter(GROUP, g, MATCH)])
    grants = [
        binding(CLUSTER, "kafka-cluster", "User:bob", DESCRIBE),
        binding(CLUSTER, "kafka-cluster", "User:carol", ALTER),
    ]
    grant(s, *grants)
    s.use("bob")
    s.call(29, 3, "describe_with_cluster_describe", **acl_filter(GROUP, g, MATCH))
    s.call(30, 3, "create_with_describe_only", creations=[binding(GROUP, g, "User:bob", READ)])
    s.use("carol")
    s.call(30, 3, "create_with_alter", creations=[binding(GROUP, g, "User:carol", READ)])
    s.call(29, 3, "describe_with_alter_implies_describe", **acl_filter(GROUP, g, MATCH))
    s.call(31, 3, "delete_with_alter", filters=[acl_filter(GROUP, g, MATCH)])
    revoke(s, *grants)


@scenario
def scenario_acls_create_twice_and_wildcards(s: Session) -> None:
    g = s.group("twice")
    b = binding(GROUP, g, "User:alice", READ)
    grant(s, b, b, label="create_same_twice")
    grant(s, b, label="create_existing")
    describe_sorted(s, "one_acl", name=g)
    grant(s, binding(GROUP, "*", "User:carol", DESCRIBE))
    describe_sorted(s, "match_sees_wildcard", name=g, pattern=MATCH, principal="User:carol")
    other = s.group("any-other")
    coordinator_ready(s, g)
    coordinator_ready(s, other)
    s.use("carol")
    describe_groups(s, [g], "wildcard_resource")
    describe_groups(s, [other], "wildcard_resource_other")
    revoke(s, binding(GROUP, "*", "User:carol", DESCRIBE))


@scenario
def scenario_wildcard_principal_and_host(s: Session) -> None:
    g, g2 = s.group("wp"), s.group("wh")
    coordinator_ready(s, g)
    grant(
        s,
        binding(GROUP, g, "User:*", DESCRIBE),
        binding(GROUP, g2, "User:alice", DESCRIBE, host="10.9.9.9"),
    )
    s.use("bob")
    describe_groups(s, [g], "wildcard_principal")
    s.use("alice")
    describe_groups(s, [g2], "other_host")


# --- topics: metadata, produce, list offsets, configs ----------------------------------------


@scenario
def scenario_metadata_topic_describe(s: Session) -> None:
    t_ok, t_no = topic(s, "md-ok"), topic(s, "md-no")
    grant(s, binding(TOPIC, t_ok, "User:alice", WRITE))
    s.use("alice")
    s.call(
        3,
        12,
        "named",
        topics=[{"name": t_ok, "topic_id": uuid.UUID(int=0)}, {"name": t_no, "topic_id": uuid.UUID(int=0)}],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=True,
    )
    r = plain(
        s.raw(3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    )
    s.note("all_topics_contains", sorted(t["name"] for t in r["topics"] if t["name"] in (t_ok, t_no)))


@scenario
def scenario_metadata_auto_create_needs_create(s: Session) -> None:
    new, new2 = s.topic("md-new"), s.topic("md-new2")
    grant(s, binding(TOPIC, new, "User:alice", DESCRIBE), binding(TOPIC, new2, "User:alice", ALL))
    s.use("alice")
    s.call(
        3,
        12,
        "auto_create",
        topics=[{"name": new, "topic_id": uuid.UUID(int=0)}],
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )


@scenario
def scenario_produce_and_list_offsets(s: Session) -> None:
    t_ok, t_no = topic(s, "pr-ok"), topic(s, "pr-no")
    grant(s, binding(TOPIC, t_ok, "User:alice", DESCRIBE))
    s.use("alice")
    s.call(
        2,
        8,
        "list_offsets",
        replica_id=-1,
        isolation_level=0,
        topics=[
            {"name": t, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}
            for t in (t_ok, t_no)
        ],
    )


@scenario
def scenario_describe_configs(s: Session) -> None:
    t = topic(s, "cfg")
    g = s.group("cfg")
    s.use("alice")
    r = plain(
        s.raw(
            32,
            4,
            resources=[
                {"resource_type": 2, "resource_name": t, "configuration_keys": ["cleanup.policy"]},
                {
                    "resource_type": 32,
                    "resource_name": g,
                    "configuration_keys": ["consumer.session.timeout.ms"],
                },
            ],
            include_synonyms=False,
            include_documentation=False,
        )
    )
    r["results"].sort(key=lambda x: x["resource_type"])
    s.note("denied", r)


@scenario
def scenario_fetch_topic_read(s: Session) -> None:
    t_ok, t_no = topic(s, "fe-ok"), topic(s, "fe-no")
    grant(s, binding(TOPIC, t_ok, "User:alice", READ))
    s.use("alice")
    r = plain(
        s.raw(
            1,
            12,
            replica_id=-1,
            max_wait=0,
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                {
                    "topic": t,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": -1,
                            "fetch_offset": 0,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1024,
                        }
                    ],
                }
                for t in (t_ok, t_no)
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
    )
    s.note(
        "errors",
        {
            "error_code": r["error_code"],
            "topics": sorted(
                (t["topic"], [p["error_code"] for p in t["partitions"]]) for t in r["responses"]
            ),
        },
    )


@scenario
def scenario_create_topics_per_topic_create(s: Session) -> None:
    ok, no = s.topic("ct-ok"), s.topic("ct-no")
    grant(s, binding(TOPIC, ok[:-3], "User:alice", CREATE, pattern=PREFIXED))
    s.use("alice")
    r = plain(
        s.raw(
            19,
            7,
            topics=[
                {"name": t, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
                for t in (ok, no)
            ],
            timeout=30000,
            validate_only=False,
        )
    )
    s.note("created", sorted((t["name"], t["error_code"], t["error_message"]) for t in r["topics"]))


@scenario
def scenario_cluster_authorized_operations(s: Session) -> None:
    grants = [
        binding(CLUSTER, "kafka-cluster", "User:carol", DESCRIBE),
        binding(CLUSTER, "kafka-cluster", "User:carol", ALTER_CONFIGS),
    ]
    grant(s, *grants)
    s.use("carol")
    r = s.raw(60, 1, include_cluster_authorized_operations=True, endpoint_type=1)
    s.note("describe_cluster_bits", {"error_code": r.error_code, "ops": r.cluster_authorized_operations})
    m = s.raw(
        3,
        10,
        topics=[],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=False,
    )
    s.note("metadata_cluster_bits", m.cluster_authorized_operations)
    s.use("bob")
    r = s.raw(60, 1, include_cluster_authorized_operations=True, endpoint_type=1)
    s.note("no_cluster_acl_bits", {"error_code": r.error_code, "ops": r.cluster_authorized_operations})
    revoke(s, *grants)


@scenario
def scenario_group_configs_need_config_operations(s: Session) -> None:
    g = s.group("gcfg")
    coordinator_ready(s, g)
    grant(s, binding(GROUP, g, "User:alice", DESCRIBE_CONFIGS))
    s.use("alice")
    r = plain(
        s.raw(
            32,
            4,
            resources=[
                {
                    "resource_type": 32,
                    "resource_name": g,
                    "configuration_keys": ["consumer.session.timeout.ms"],
                }
            ],
            include_synonyms=False,
            include_documentation=False,
        )
    )
    s.note("describe_allowed", [(x["error_code"], [c["name"] for c in x["configs"]]) for x in r["results"]])
    s.call(
        44,
        1,
        "alter_denied",
        resources=[
            {
                "resource_type": 32,
                "resource_name": g,
                "configs": [{"name": "consumer.session.timeout.ms", "config_operation": 0, "value": "50000"}],
            }
        ],
        validate_only=False,
    )


@scenario
def scenario_init_producer_id(s: Session) -> None:
    prefix = s.topic("ipi")
    grant(s, binding(TOPIC, prefix, "User:alice", WRITE, pattern=PREFIXED))
    for who in ("alice", "bob"):
        s.use(who)
        deadline = time.monotonic() + 30
        while True:  # Kafka creates its transaction state topic on the first request
            r = s.raw(
                22, 4, transactional_id=None, transaction_timeout=60000, producer_id=-1, producer_epoch=-1
            )
            if plain(r)["error_code"] not in ("coordinator_load_in_progress", "coordinator_not_available"):
                break
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        s.note(f"idempotent_{who}", r.error_code)
    s.use("alice")
    r = s.raw(
        22, 4, transactional_id=s.group("txn"), transaction_timeout=60000, producer_id=-1, producer_epoch=-1
    )
    s.note("transactional_denied", r.error_code)


@scenario
def scenario_cg_describe_member_topics_not_described(s: Session) -> None:
    t = topic(s, "cgdm")
    g = s.group("cgdm")
    coordinator_ready(s, g)
    s.use("admin")
    mid = str(uuid.uuid4())
    r = cgh(s, g, names=[t], member_id=mid, record=False)
    deadline = time.monotonic() + 30
    while r.assignment is None or not r.assignment.topic_partitions:  # Kafka assigns in the background
        if time.monotonic() > deadline:
            break
        time.sleep(0.3)
        r = cgh(s, g, member_id=mid, epoch=r.member_epoch, record=False)
    s.note("member_assigned", bool(r.assignment and r.assignment.topic_partitions))
    grant(s, binding(GROUP, g, "User:alice", DESCRIBE))
    s.use("alice")
    r = plain(s.raw(69, 0, group_ids=[g], include_authorized_operations=True))
    grp = r["groups"][0]
    s.note(
        "described",
        {k: grp[k] for k in ("error_code", "error_message", "group_id", "authorized_operations")}
        | {"members": len(grp["members"])},
    )


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_authorization_differential(name: str, pair: SaslPair) -> None:
    outcome = run_both(SCENARIOS[name], pair.kafka, pair.groupshift, pair.identities)
    compare(outcome, KNOWN.get(name, {}))


def test_the_suite_has_sixty_scenarios() -> None:
    assert len(SCENARIOS) >= 60

"""The decision function (Kafka's StandardAuthorizerData rules) and the durable ACL store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.authorizer import Authorizer, check_authorizer_class
from gateway.authorizer.model import (
    AclBinding,
    AclFilter,
    AclOperation,
    Decider,
    PatternType,
    PermissionType,
    ResourceType,
    parse_super_users,
)
from gateway.authorizer.store import ACLS_FILE, AclStore
from gateway.dataplane.datadir import DataDirError

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = PermissionType.ALLOW, PermissionType.DENY
Op = AclOperation
ALICE = "User:alice"


def acl(
    rtype: ResourceType = T,
    name: str = "orders",
    pattern: PatternType = LIT,
    principal: str = ALICE,
    host: str = "*",
    op: AclOperation = Op.READ,
    perm: PermissionType = ALLOW,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def allowed(
    acls: list[AclBinding], op: AclOperation, name: str = "orders", rtype: ResourceType = T, **kw: object
) -> bool:
    principal = str(kw.get("principal", ALICE))
    host = str(kw.get("host", "127.0.0.1"))
    d = Decider(
        acls, super_users=frozenset(kw.get("super_users", ())), allow_if_no_acl=bool(kw.get("allow", False))
    )  # type: ignore[call-overload]
    return d.authorize(principal, host, op, rtype, name)


def test_literal_prefixed_and_wildcard_patterns_cover_the_names_kafka_covers() -> None:
    assert allowed([acl()], Op.READ)
    assert not allowed([acl()], Op.READ, "orders2")
    assert allowed([acl(name="ord", pattern=PRE)], Op.READ, "orders")
    assert not allowed([acl(name="ord", pattern=PRE)], Op.READ, "or")
    assert allowed([acl(name="*")], Op.READ, "anything")
    assert not allowed([acl(name="*", pattern=PRE)], Op.READ, "anything")  # a PREFIXED "*" is a prefix
    assert not allowed([acl(rtype=G)], Op.READ)  # another resource type


def test_deny_wins_over_allow_wherever_it_comes_from() -> None:
    acls = [acl(name="*"), acl(name="ord", pattern=PRE, perm=DENY)]
    assert not allowed(acls, Op.READ)
    assert allowed(acls, Op.READ, "payments")
    assert not allowed([acl(op=Op.ALL), acl(principal="User:*", perm=DENY)], Op.READ)


def test_implied_operations_only_for_allow() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert allowed([acl(op=op)], Op.DESCRIBE)
    assert not allowed([acl(op=Op.CREATE)], Op.DESCRIBE)
    assert allowed([acl(op=Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS)
    assert not allowed([acl(op=Op.DESCRIBE_CONFIGS)], Op.ALTER_CONFIGS)
    assert allowed([acl(op=Op.ALL)], Op.ALTER)
    # a DENY READ does not deny DESCRIBE
    assert allowed([acl(op=Op.DESCRIBE), acl(op=Op.READ, perm=DENY)], Op.DESCRIBE)
    assert not allowed([acl(op=Op.DESCRIBE), acl(op=Op.ALL, perm=DENY)], Op.DESCRIBE)


def test_principal_and_host_matching() -> None:
    assert allowed([acl(principal="User:*")], Op.READ, principal="User:bob")
    assert not allowed([acl()], Op.READ, principal="User:bob")
    assert allowed([acl(host="10.0.0.1")], Op.READ, host="10.0.0.1")
    assert not allowed([acl(host="10.0.0.1")], Op.READ, host="127.0.0.1")


def test_no_acl_found_and_super_users() -> None:
    assert not allowed([], Op.READ)
    assert allowed([], Op.READ, allow=True)
    # an ACL for someone else on the resource: denied even with allow.everyone.if.no.acl.found
    assert not allowed([acl(principal="User:bob")], Op.READ, allow=True)
    assert allowed([acl(perm=DENY)], Op.READ, super_users={ALICE})
    assert parse_super_users(" User:a ; User:b;;") == frozenset({"User:a", "User:b"})


names = st.text(alphabet="ab*", max_size=3)
acls_st = st.lists(
    st.builds(
        AclBinding,
        st.sampled_from([T, G]),
        names,
        st.sampled_from([LIT, PRE]),
        st.sampled_from([ALICE, "User:*", "User:bob"]),
        st.sampled_from(["*", "127.0.0.1"]),
        st.sampled_from([Op.ALL, Op.READ, Op.DESCRIBE, Op.WRITE]),
        st.sampled_from([ALLOW, DENY]),
    ),
    max_size=6,
)


@given(acls_st, names, st.sampled_from([Op.READ, Op.DESCRIBE, Op.WRITE]), st.booleans())
def test_the_decision_is_kafkas_rule_restated(
    acls: list[AclBinding], name: str, op: AclOperation, dflt: bool
) -> None:
    """An independent restatement of StandardAuthorizerData: deny, allow, covered, default."""

    def covers(a: AclBinding) -> bool:
        return a.resource_type == T and (
            (a.pattern_type == LIT and a.resource_name in (name, "*"))
            or (a.pattern_type == PRE and name.startswith(a.resource_name))
        )

    def matches(a: AclBinding) -> bool:
        if a.principal not in (ALICE, "User:*") or a.host not in ("*", "127.0.0.1"):
            return False
        implied = {Op.DESCRIBE: {Op.DESCRIBE, Op.READ, Op.WRITE}}.get(op, {op})
        return a.operation == Op.ALL or (
            a.operation in implied if a.permission == ALLOW else a.operation == op
        )

    covering = [a for a in acls if covers(a)]
    if any(matches(a) and a.permission == DENY for a in covering):
        expected = False
    elif any(matches(a) for a in covering):
        expected = True
    else:
        expected = not covering and dflt
    assert allowed(acls, op, name, allow=dflt) == expected


def test_filters_match_as_kafkas_acl_binding_filter() -> None:
    lit, pre, star = acl(), acl(name="ord", pattern=PRE), acl(name="*")

    def f(pattern: PatternType, name: str | None) -> AclFilter:
        return AclFilter(ResourceType.ANY, name, pattern, None, None, Op.ANY, PermissionType.ANY)

    assert [a for a in (lit, pre, star) if f(PatternType.MATCH, "orders").matches(a)] == [lit, pre, star]
    assert [a for a in (lit, pre, star) if f(PatternType.ANY, "orders").matches(a)] == [lit]
    assert [a for a in (lit, pre, star) if f(PRE, None).matches(a)] == [pre]
    assert not f(PRE, "orders").matches(pre)


def test_the_store_survives_a_reopen_and_refuses_a_damaged_file(tmp_path: Path) -> None:
    store = AclStore(tmp_path)
    assert store.acls == frozenset()
    store.replace(frozenset({acl(), acl(name="ord", pattern=PRE, perm=DENY)}))
    assert AclStore(tmp_path).acls == store.acls
    doc = json.loads((tmp_path / ACLS_FILE).read_text())
    doc["acls"][0][1] = "changed"
    (tmp_path / ACLS_FILE).write_text(json.dumps(doc))
    with pytest.raises(DataDirError, match="checksum mismatch"):
        AclStore(tmp_path)
    (tmp_path / ACLS_FILE).write_text("{not json")
    with pytest.raises(DataDirError, match=r"acls\.json is damaged"):
        AclStore(tmp_path)


def test_authorizer_class_names() -> None:
    assert check_authorizer_class("") == ""
    std = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert check_authorizer_class(f" {std} ") == std
    with pytest.raises(ValueError, match=r"removed in Kafka 4\.0"):
        check_authorizer_class("kafka.security.authorizer.AclAuthorizer")
    with pytest.raises(ValueError, match="only"):
        check_authorizer_class("com.example.Mine")


def test_authorizer_reads_its_acls_from_the_data_dir(tmp_path: Path) -> None:
    Authorizer(tmp_path).replace_acls(frozenset({acl()}))
    assert Authorizer(tmp_path).acls == frozenset({acl()})


def test_authorize_by_resource_type_as_kafkas_default_implementation() -> None:
    def by_type(acls: list[AclBinding], **kw: object) -> bool:
        d = Decider(acls, allow_if_no_acl=bool(kw.get("allow", False)))
        return d.authorize_by_resource_type(ALICE, "127.0.0.1", Op.WRITE, T)

    assert by_type([acl(op=Op.WRITE)])
    assert by_type([acl(name="ord", pattern=PRE, op=Op.ALL)])
    assert not by_type([acl(op=Op.READ)])  # no implication for WRITE
    assert not by_type([acl(op=Op.WRITE), acl(name="*", op=Op.WRITE, perm=DENY)])
    assert not by_type([acl(op=Op.WRITE), acl(op=Op.WRITE, perm=DENY)])
    assert not by_type([acl(op=Op.WRITE), acl(name="or", pattern=PRE, op=Op.WRITE, perm=DENY)])
    assert by_type([acl(op=Op.WRITE), acl(name="other", op=Op.WRITE, perm=DENY)])
    assert by_type([], allow=True) and not by_type([])

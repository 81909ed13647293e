"""Upstream mode's identity (issue 29): the `upstream.identity` setting, the checks added for
the APIs upstream mode forwards (Kafka 4.x's KafkaApis rules), and the delegation-token APIs
refused as Kafka refuses them with tokens disabled. The forwarded path itself, against a real
Kafka and compared with one, is e2e/test_upstream_gateway_acls.py."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from gateway.authorizer import Authorizer
from gateway.authorizer.model import AclBinding, AclOperation, PatternType, PermissionType, ResourceType
from gateway.config import ConfigError, build_config
from gateway.registry import HandlerRegistry, RequestContext
from gateway.sasl.delegation_token_apis import DELEGATION_TOKEN_APIS, DelegationTokenRefusals
from protocol.client import make_request
from tests.test_authorizer_checks import Stub, checked

T, X = ResourceType.TOPIC, ResourceType.TRANSACTIONAL_ID
Op = AclOperation


def test_identity_defaults_to_gateway_and_unknown_modes_are_refused_by_name() -> None:
    cfg = build_config({"upstream.bootstrap.servers": "h:9092"})
    assert cfg.upstream is not None and cfg.upstream.identity == "gateway"
    with pytest.raises(ConfigError, match=r"upstream\.identity must be gateway or passthrough"):
        build_config({"upstream.bootstrap.servers": "h:9092", "upstream.identity": "cluster"})


@pytest.fixture
def authorizer(tmp_path: Path) -> Authorizer:
    a = Authorizer(tmp_path, super_users="User:admin")
    allow = PermissionType.ALLOW
    a.replace_acls(
        frozenset(
            {
                AclBinding(T, "orders", PatternType.LITERAL, "User:alice", "*", Op.READ, allow),
                AclBinding(T, "payments", PatternType.LITERAL, "User:alice", "*", Op.DESCRIBE, allow),
                AclBinding(X, "tx-", PatternType.PREFIXED, "User:alice", "*", Op.WRITE, allow),
            }
        )
    )
    return a


def ctx(principal: str = "User:alice", listener: str = "SASL_SSL") -> RequestContext:
    return RequestContext(
        1, ("127.0.0.1", 5000), ("127.0.0.1", 9092), principal=principal, listener_name=listener
    )


def test_describe_producers_answers_in_the_request_order(authorizer: Authorizer) -> None:
    stub = Stub(61)
    fn = checked(authorizer, 61, stub)
    req = make_request(
        61,
        0,
        topics=[
            {"name": "secret", "partition_indexes": [0, 1]},
            {"name": "orders", "partition_indexes": [0]},
            {"name": "hidden", "partition_indexes": [2]},
        ],
    )
    r = fn(ctx(), None, req)
    assert [t.name for t in stub.got[0].topics] == ["orders"]
    assert [
        (t.name, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions]) for t in r.topics
    ] == [
        (
            "secret",
            [(i, ErrorCode.topic_authorization_failed, "Topic authorization failed.") for i in (0, 1)],
        ),
        ("orders", [(0, ErrorCode.none, None)]),
        ("hidden", [(2, ErrorCode.topic_authorization_failed, "Topic authorization failed.")]),
    ]


def test_offset_for_leader_epoch_needs_describe_per_topic(authorizer: Authorizer) -> None:
    stub = Stub(23)
    fn = checked(authorizer, 23, stub)
    part = [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]
    req = make_request(
        23,
        4,
        replica_id=-1,
        topics=[{"topic": "secret", "partitions": part}, {"topic": "payments", "partitions": part}],
    )
    r = fn(ctx(), None, req)
    assert [t.topic for t in stub.got[0].topics] == ["payments"]
    assert [(t.topic, [p.error_code for p in t.partitions]) for t in r.topics] == [
        ("payments", [ErrorCode.none]),
        ("secret", [ErrorCode.topic_authorization_failed]),
    ]


def test_a_followers_fetch_needs_cluster_action(authorizer: Authorizer) -> None:
    stub = Stub(1)
    fn = checked(authorizer, 1, stub)
    part = {
        "partition": 0,
        "current_leader_epoch": -1,
        "fetch_offset": 0,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
        "partition_max_bytes": 1024,
    }
    req = make_request(
        1,
        12,
        replica_id=1,
        max_wait=0,
        min_bytes=0,
        max_bytes=1024,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[{"topic": "orders", "partitions": [part]}],
        forgotten_topics_data=[],
        rack_id="",
    )
    r = fn(ctx(), None, req)
    assert not stub.got
    assert [p.error_code for t in r.responses for p in t.partitions] == [ErrorCode.topic_authorization_failed]


def test_add_partitions_to_txn_refuses_all_when_a_topic_is_refused(authorizer: Authorizer) -> None:
    stub = Stub(24)
    fn = checked(authorizer, 24, stub)

    def req(txn: str) -> Any:
        return make_request(
            24,
            3,
            v3_and_below_transactional_id=txn,
            v3_and_below_producer_id=1,
            v3_and_below_producer_epoch=0,
            v3_and_below_topics=[
                {"name": "orders", "partitions": [0]},
                {"name": "payments", "partitions": [1]},
            ],
        )

    def codes(r: Any) -> list[tuple[str, int]]:
        return [
            (t.name, int(p.partition_error_code))
            for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition
        ]

    assert codes(fn(ctx(), None, req("other"))) == [("orders", 53), ("payments", 53)]
    # alice may WRITE neither topic (READ and DESCRIBE only)
    assert codes(fn(ctx(), None, req("tx-1"))) == [("orders", 29), ("payments", 29)]
    assert not stub.got
    fn(ctx("User:admin"), None, req("tx-1"))
    assert len(stub.got) == 1


def test_end_txn_and_describe_transactions_check_the_transactional_id(authorizer: Authorizer) -> None:
    stub = Stub(26)
    fn = checked(authorizer, 26, stub)
    r = fn(
        ctx(),
        None,
        make_request(26, 3, transactional_id="other", producer_id=1, producer_epoch=0, committed=True),
    )
    assert r.error_code == ErrorCode.transactional_id_authorization_failed and not stub.got
    stub = Stub(65)
    fn = checked(authorizer, 65, stub)
    r = fn(ctx(), None, make_request(65, 0, transactional_ids=["other", "tx-1"]))
    assert stub.got[0].transactional_ids == ("tx-1",)
    assert [(s.transactional_id, s.error_code) for s in r.transaction_states] == [
        ("other", ErrorCode.transactional_id_authorization_failed),
        ("tx-1", ErrorCode.none),
    ]


# --- delegation tokens ---------------------------------------------------------------------------


@pytest.fixture
def refusals() -> DelegationTokenRefusals:
    protocols = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_SSL": "SASL_SSL"}
    return DelegationTokenRefusals(lambda name: protocols[name])


def test_delegation_token_apis_are_registered_but_not_advertised(refusals: DelegationTokenRefusals) -> None:
    registry = HandlerRegistry()
    refusals.register(registry)
    assert set(registry) == DELEGATION_TOKEN_APIS
    assert not {k for k, _, _ in registry.advertised()} & DELEGATION_TOKEN_APIS


def test_delegation_tokens_are_refused_as_kafka_refuses_them(refusals: DelegationTokenRefusals) -> None:
    create = make_request(
        38, 3, owner_principal_type=None, owner_principal_name=None, renewers=[], max_lifetime=-1
    )
    r = refusals.create(ctx("User:alice", "SASL_SSL"), None, create)
    assert r.error_code == ErrorCode.delegation_token_auth_disabled
    assert (r.principal_type, r.principal_name, r.token_requester_principal_name) == (
        "User",
        "alice",
        "alice",
    )
    assert r.expiry_timestamp == datetime.datetime.fromtimestamp(0, tz=datetime.UTC)  # the controller's
    r = refusals.create(ctx("User:ANONYMOUS", "PLAINTEXT"), None, create)
    assert r.error_code == ErrorCode.delegation_token_request_not_allowed
    assert r.expiry_timestamp == datetime.datetime.fromtimestamp(-0.001, tz=datetime.UTC)  # the broker's
    # PLAINTEXT, and SSL without a client certificate, may not ask for tokens at all
    for listener, principal in (("PLAINTEXT", "User:ANONYMOUS"), ("SSL", "User:ANONYMOUS")):
        r = refusals.describe(ctx(principal, listener), None, make_request(41, 3, owners=None))
        assert r.error_code == ErrorCode.delegation_token_request_not_allowed
    r = refusals.describe(ctx("User:bob", "SSL"), None, make_request(41, 3, owners=None))
    assert r.error_code == ErrorCode.delegation_token_auth_disabled
    renew = make_request(39, 2, hmac=b"x", renew_period=-1)
    assert refusals.renew_or_expire(ctx(), None, renew).error_code == ErrorCode.delegation_token_auth_disabled


def test_a_fetch_of_refused_topics_only_has_no_top_level_error(authorizer: Authorizer) -> None:
    """Kafka answers NONE at the top, the error per partition and an empty record set: a null
    one is a parse failure to librdkafka, which then retries at once and never reports the
    error (found by e2e/test_upstream_gateway_acls.py)."""
    stub = Stub(1)
    fn = checked(authorizer, 1, stub)
    part = {
        "partition": 0,
        "current_leader_epoch": -1,
        "fetch_offset": 0,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
        "partition_max_bytes": 1024,
    }
    req = make_request(
        1,
        12,
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        max_bytes=1024,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[{"topic": "payments", "partitions": [part]}],
        forgotten_topics_data=[],
        rack_id="",
    )
    r = fn(ctx(), None, req)
    assert not stub.got and r.error_code == ErrorCode.none
    assert [p.records for t in r.responses for p in t.partitions] == [b""]  # empty, not null
    assert [(t.topic, [p.error_code for p in t.partitions]) for t in r.responses] == [
        ("payments", [ErrorCode.topic_authorization_failed])
    ]


# --- what upstream mode advertises -----------------------------------------------------------------


def _proxy(tmp_path: Path, **settings: str) -> Any:
    import asyncio

    from gateway.server import GatewayServer
    from gateway.upstream import install_upstream_mode

    config = build_config(
        {"upstream.bootstrap.servers": "10.0.0.1:9092", "log.dirs": str(tmp_path / "data"), **settings}
    )
    installed: list[Any] = []
    server = GatewayServer(config, extensions=[lambda s: installed.append(install_upstream_mode(s))])
    proxy = installed[0]
    # The upstream's ApiVersions: every forwarded API up to a version beyond what kio decodes.
    proxy.cluster.api_versions.update({k: (0, 99) for k in (0, 1, 3, 29, 30, 31, 50, 51, 75)})
    advertised = {k: (lo, hi) for k, lo, hi in proxy.advertised()}
    for hook in server.on_stop:
        hook()
    asyncio.run(server.plane.close())
    return proxy, advertised


def test_without_an_authorizer_the_forwarded_path_is_unchanged(tmp_path: Path) -> None:
    proxy, advertised = _proxy(tmp_path)
    assert proxy.acls is None
    assert advertised[29] == (0, 99) and advertised[75] == (0, 99)  # forwarded as the cluster serves them
    assert not advertised.keys() & DELEGATION_TOKEN_APIS


def test_with_an_authorizer_only_checked_apis_are_advertised_and_security_is_groupshifts(
    tmp_path: Path,
) -> None:
    from protocol.codec import api_schema

    proxy, advertised = _proxy(
        tmp_path, **{"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    )
    assert proxy.acls is not None
    assert 75 not in advertised  # DescribeTopicPartitions: no check entry yet
    for key in (0, 1, 3):  # decodable, since each is decoded to be authorized
        assert api_schema(key, advertised[key][1]) is not None and advertised[key][1] < 99
    assert advertised[29][1] < 99 and advertised[51][1] < 99  # groupshift's own ACL and SCRAM APIs
    assert not advertised.keys() & DELEGATION_TOKEN_APIS

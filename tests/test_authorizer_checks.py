"""Each API's checks (gateway.authorizer.checks) in front of a stand-in handler: what reaches the
handler, and what the refused part of the request is answered with (Kafka 4.x's KafkaApis rules;
the same answers are compared with a real Kafka in e2e/test_differential_acls.py)."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from gateway.authorizer import Authorizer
from gateway.authorizer.acl_apis import AclApis
from gateway.authorizer.checks import CHECKS, Guard, wrap
from gateway.authorizer.model import (
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from gateway.error_response import error_response
from gateway.registry import CloseConnection, HandlerRegistry, RequestContext
from protocol.client import make_request
from protocol.codec import response_type_of
from protocol.kafka_schemas import StreamsGroupTopologyDescriptionUpdateResponse

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
Op = AclOperation


@dataclasses.dataclass
class Topic:
    name: str
    topic_id: uuid.UUID


class Topics:
    def __init__(self, names: list[str]) -> None:
        self.by_name = {n: Topic(n, uuid.uuid4()) for n in names}

    def all(self) -> list[Topic]:
        return list(self.by_name.values())


class FakePlane:
    """The parts of the data plane the checks read."""

    auto_create_topics = True

    def __init__(self, names: list[str]) -> None:
        self.topics = Topics(names)

    def topic(self, name: str) -> Topic | None:
        return self.topics.by_name.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return next((t for t in self.topics.all() if t.topic_id == topic_id), None)


@pytest.fixture
def authorizer(tmp_path: Path) -> Authorizer:
    a = Authorizer(tmp_path, super_users="User:admin")
    a.replace_acls(
        frozenset(
            {
                AclBinding(G, "g-", PatternType.PREFIXED, "User:alice", "*", Op.READ, PermissionType.ALLOW),
                AclBinding(
                    G, "g-secret", PatternType.LITERAL, "User:alice", "*", Op.ALL, PermissionType.DENY
                ),
                AclBinding(
                    T, "orders", PatternType.LITERAL, "User:alice", "*", Op.READ, PermissionType.ALLOW
                ),
                AclBinding(T, "*", PatternType.LITERAL, "User:bob", "*", Op.DESCRIBE, PermissionType.ALLOW),
            }
        )
    )
    return a


def ctx(principal: str = "User:alice") -> RequestContext:
    return RequestContext(1, ("127.0.0.1", 5000), ("127.0.0.1", 9092), principal=principal)


class Stub:
    """A handler that records the request it got and answers with an error-free response."""

    def __init__(self, api_key: int, answer: Any = None) -> None:
        self.api_key = api_key
        self.got: list[Any] = []
        self.answer = answer

    def __call__(self, c: RequestContext, header: Any, req: Any) -> Any:
        self.got.append(req)
        if self.answer is not None:
            return self.answer(req)
        return error_response(self.api_key, response_type_of(req), req, ErrorCode.none)


def checked(authorizer: Authorizer, api_key: int, stub: Stub, topics: list[str] | None = None) -> Any:
    return wrap(Guard(authorizer, FakePlane(topics or ["orders", "payments"])), api_key, stub)  # type: ignore[arg-type]


def test_group_read_apis_refuse_the_whole_request(authorizer: Authorizer) -> None:
    stub = Stub(11)
    fn = checked(authorizer, 11, stub)
    join = {
        "session_timeout": 10000,
        "rebalance_timeout": 10000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [],
        "reason": None,
    }
    r = fn(ctx(), None, make_request(11, 9, group_id="g-ok", **join))
    assert r.error_code == ErrorCode.none and len(stub.got) == 1
    r = fn(ctx(), None, make_request(11, 9, group_id="g-secret", **join))  # DENY ALL wins
    assert r.error_code == ErrorCode.group_authorization_failed and len(stub.got) == 1
    r = fn(ctx("User:admin"), None, make_request(11, 9, group_id="anything", **join))
    assert r.error_code == ErrorCode.none  # super user


def test_offset_commit_splits_refused_topics(authorizer: Authorizer) -> None:
    stub = Stub(8)
    fn = checked(authorizer, 8, stub)

    def req(*topics: str) -> Any:
        parts = [
            {
                "partition_index": 0,
                "committed_offset": 1,
                "committed_leader_epoch": -1,
                "committed_metadata": "",
            }
        ]
        return make_request(
            8,
            9,
            group_id="g-1",
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[{"name": t, "partitions": parts} for t in topics],
        )

    r = fn(ctx(), None, req("orders", "payments"))
    assert [t.name for t in stub.got[-1].topics] == ["orders"]
    assert [(t.name, t.partitions[0].error_code) for t in r.topics] == [
        ("payments", ErrorCode.topic_authorization_failed),
        ("orders", ErrorCode.none),
    ]
    calls = len(stub.got)
    r = fn(ctx(), None, req("payments"))
    assert len(stub.got) == calls  # nothing authorized: the handler is not called
    r = fn(ctx("User:bob"), None, req("orders"))
    assert r.topics[0].partitions[0].error_code == ErrorCode.group_authorization_failed


def test_txn_offset_commit_needs_the_transactional_id_then_the_group_then_topics(tmp_path: Path) -> None:
    """Kafka `handleTxnOffsetCommitRequest`: WRITE on the transactional id, READ on the group,
    READ per topic, each refusal answered per partition."""
    a = Authorizer(tmp_path)
    allow = PermissionType.ALLOW
    a.replace_acls(
        frozenset(
            {
                AclBinding(
                    ResourceType.TRANSACTIONAL_ID,
                    "copier",
                    PatternType.LITERAL,
                    "User:alice",
                    "*",
                    Op.WRITE,
                    allow,
                ),
                AclBinding(G, "g-1", PatternType.LITERAL, "User:alice", "*", Op.READ, allow),
                AclBinding(G, "g-1", PatternType.LITERAL, "User:bob", "*", Op.READ, allow),
                AclBinding(T, "orders", PatternType.LITERAL, "User:alice", "*", Op.READ, allow),
            }
        )
    )
    stub = Stub(28)
    fn = checked(a, 28, stub)

    def req(txn: str, group: str, *topics: str) -> Any:
        parts = [
            {
                "partition_index": 0,
                "committed_offset": 1,
                "committed_leader_epoch": -1,
                "committed_metadata": "",
            }
        ]
        return make_request(
            28,
            3,
            transactional_id=txn,
            group_id=group,
            producer_id=1,
            producer_epoch=0,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=[{"name": t, "partitions": parts} for t in topics],
        )

    def codes(r: Any) -> list[tuple[str, int]]:
        return [(t.name, t.partitions[0].error_code) for t in r.topics]

    r = fn(ctx(), None, req("copier", "g-1", "orders", "payments"))
    assert [t.name for t in stub.got[-1].topics] == ["orders"]
    assert codes(r) == [("payments", ErrorCode.topic_authorization_failed), ("orders", ErrorCode.none)]
    r = fn(ctx(), None, req("other", "g-1", "orders"))
    assert codes(r) == [("orders", ErrorCode.transactional_id_authorization_failed)]
    r = fn(ctx(), None, req("copier", "g-2", "orders"))
    assert codes(r) == [("orders", ErrorCode.group_authorization_failed)]
    r = fn(ctx("User:bob"), None, req("copier", "g-1", "orders"))
    assert codes(r) == [("orders", ErrorCode.transactional_id_authorization_failed)]
    assert len(stub.got) == 1


def test_offset_fetch_filters_all_topics_and_refuses_named_ones(authorizer: Authorizer) -> None:
    def answer(req: Any) -> Any:
        grp = req.groups[0]
        names = ["orders", "payments"] if grp.topics is None else [t.name for t in grp.topics]
        topics = [
            {
                "name": n,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 3,
                        "committed_leader_epoch": -1,
                        "metadata": "",
                        "error_code": 0,
                    }
                ],
            }
            for n in names
        ]
        from protocol.entity_builder import build

        return build(
            response_type_of(req),
            {"throttle_time": 0, "groups": [{"group_id": grp.group_id, "topics": topics, "error_code": 0}]},
        )

    stub = Stub(9, answer)
    fn = checked(authorizer, 9, stub)
    every = fn(
        ctx(),
        None,
        make_request(
            9,
            9,
            groups=[{"group_id": "g-1", "member_id": None, "member_epoch": -1, "topics": None}],
            require_stable=False,
        ),
    )
    assert [t.name for t in every.groups[0].topics] == ["orders"]
    named = fn(
        ctx(),
        None,
        make_request(
            9,
            9,
            groups=[
                {
                    "group_id": "g-1",
                    "member_id": None,
                    "member_epoch": -1,
                    "topics": [
                        {"name": "orders", "partition_indexes": [0]},
                        {"name": "payments", "partition_indexes": [0]},
                    ],
                },
                {"group_id": "other", "member_id": None, "member_epoch": -1, "topics": None},
            ],
            require_stable=False,
        ),
    )
    g1, other = named.groups
    assert [(t.name, t.partitions[0].error_code, t.partitions[0].committed_offset) for t in g1.topics] == [
        ("orders", ErrorCode.none, 3),
        ("payments", ErrorCode.topic_authorization_failed, -1),
    ]
    assert other.error_code == ErrorCode.group_authorization_failed


def test_list_groups_keeps_the_groups_the_principal_may_describe(authorizer: Authorizer) -> None:
    from protocol.entity_builder import build

    def answer(req: Any) -> Any:
        groups = [
            {"group_id": g, "protocol_type": "consumer", "group_state": "Empty", "group_type": "classic"}
            for g in ("g-1", "g-secret", "h")
        ]
        return build(response_type_of(req), {"throttle_time": 0, "error_code": 0, "groups": groups})

    fn = checked(authorizer, 16, Stub(16, answer))
    r = fn(ctx(), None, make_request(16, 5, states_filter=[], types_filter=[]))
    assert [g.group_id for g in r.groups] == ["g-1"]
    r = fn(ctx("User:admin"), None, make_request(16, 5, states_filter=[], types_filter=[]))
    assert len(r.groups) == 3


def test_metadata_hides_and_refuses_topics_and_creates_nothing_unauthorized(authorizer: Authorizer) -> None:
    from protocol.entity_builder import build

    def answer(req: Any) -> Any:
        names = ["orders", "payments"] if req.topics is None else [t.name for t in req.topics]
        topics = [
            {
                "error_code": 0,
                "name": n,
                "topic_id": uuid.uuid4(),
                "is_internal": False,
                "partitions": [],
                "topic_authorized_operations": -(2**31),
            }
            for n in names
        ]
        return build(
            response_type_of(req),
            {"throttle_time": 0, "brokers": [], "cluster_id": "c", "controller_id": 0, "topics": topics},
        )

    stub = Stub(3, answer)
    fn = checked(authorizer, 3, stub)
    r = fn(
        ctx(),
        None,
        make_request(
            3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=True
        ),
    )
    assert [(t.name, t.topic_authorized_operations) for t in r.topics] == [("orders", (1 << 3) | (1 << 8))]
    named = [{"name": n, "topic_id": uuid.UUID(int=0)} for n in ("orders", "payments", "new-topic")]
    r = fn(
        ctx(),
        None,
        make_request(
            3, 12, topics=named, allow_auto_topic_creation=True, include_topic_authorized_operations=False
        ),
    )
    assert [t.name for t in stub.got[-1].topics] == ["orders"]  # nothing else reaches auto-creation
    assert [(t.name, t.error_code) for t in r.topics] == [
        ("orders", ErrorCode.none),
        ("payments", ErrorCode.topic_authorization_failed),
        ("new-topic", ErrorCode.topic_authorization_failed),
    ]


def test_consumer_group_heartbeat_topics_and_regex_filter(authorizer: Authorizer) -> None:
    stub = Stub(68)
    fn = checked(authorizer, 68, stub)
    base = {
        "member_id": "m",
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": 30000,
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [],
    }
    c = ctx()
    r = fn(
        c, None, make_request(68, 1, group_id="g-1", subscribed_topic_names=["orders", "payments"], **base)
    )
    assert r.error_code == ErrorCode.topic_authorization_failed and r.error_message is None and not stub.got
    r = fn(c, None, make_request(68, 1, group_id="g-1", subscribed_topic_names=["orders"], **base))
    assert r.error_code == ErrorCode.none
    keep = c.attributes["authorizer.topic_filter"]
    assert keep("orders") and not keep("payments")
    r = fn(ctx("User:bob"), None, make_request(68, 1, group_id="g-1", subscribed_topic_names=[], **base))
    assert r.error_code == ErrorCode.group_authorization_failed and r.member_epoch == 0


def test_produce_with_acks_0_closes_the_connection_when_refused(authorizer: Authorizer) -> None:
    fn = checked(authorizer, 0, Stub(0))
    req = make_request(
        0,
        9,
        transactional_id=None,
        acks=0,
        timeout=1000,
        topic_data=[{"name": "payments", "partition_data": [{"index": 0, "records": None}]}],
    )
    with pytest.raises(CloseConnection):
        fn(ctx(), None, req)


def test_an_api_without_an_entry_is_for_super_users_only(authorizer: Authorizer) -> None:
    assert 55 not in CHECKS  # DescribeQuorum: not served by groupshift
    stub = Stub(55)
    fn = checked(authorizer, 55, stub)
    req = make_request(55, 1, topics=[])
    assert fn(ctx(), None, req).error_code == ErrorCode.cluster_authorization_failed
    assert fn(ctx("User:admin"), None, req).error_code == ErrorCode.none


def test_acl_apis_without_an_authorizer_answer_security_disabled() -> None:
    registry = HandlerRegistry()
    AclApis(None).register(registry)
    describe = registry.get(29)
    assert describe is not None
    r = describe.fn(
        ctx(),
        None,
        make_request(
            29,
            3,
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        ),
    )
    assert (r.error_code, r.error_message) == (
        ErrorCode.security_disabled,
        "No Authorizer is configured on the broker",
    )
    with pytest.raises(CloseConnection):  # an UNKNOWN code fails to parse in Kafka
        describe.fn(
            ctx(),
            None,
            make_request(
                29,
                3,
                resource_type_filter=0,
                resource_name_filter=None,
                pattern_type_filter=1,
                principal_filter=None,
                host_filter=None,
                operation=1,
                permission_type=1,
            ),
        )


def test_the_docs_table_is_the_checks_table() -> None:
    """docs/security.md's per-API table is generated from CHECKS; this keeps them equal."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "security.md").read_text()
    for api_key, (description, _) in CHECKS.items():
        api, _, rule = description.partition(": ")
        assert f"| {api} ({api_key}) | {rule} |" in text, description


def test_each_refusal_is_an_audit_event_and_counted(tmp_path: Path) -> None:
    from structlog.testing import capture_logs

    from gateway.audit import AuditLog
    from gateway.metrics import MetricsRegistry

    metrics = MetricsRegistry()
    a = Authorizer(tmp_path, audit=AuditLog(metrics))
    with capture_logs() as logs:
        assert not a.authorize(ctx(), Op.READ, G, "g-1", api="JoinGroup")
        assert not a.authorize(ctx(), Op.DESCRIBE, G, "g-2", api="ListGroups", log_if_denied=False)
    denied = [e for e in logs if e["event"] == "acl.denied"]
    assert [(e["principal"], e["api"], e["resource_name"], e["operation"]) for e in denied] == [
        ("User:alice", "JoinGroup", "g-1", "READ")
    ]
    assert 'groupshift_acl_denials_total{api="JoinGroup",operation="READ"} 1' in metrics.render().splitlines()


def test_no_exposure_warning_when_an_authorizer_guards_the_listener(tmp_path: Path) -> None:
    import asyncio

    from structlog.testing import capture_logs

    from gateway.config import build_config
    from gateway.server import GatewayServer

    config = build_config(
        {
            "log.dirs": str(tmp_path / "data"),
            "listeners": "PLAINTEXT://0.0.0.0:0",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        }
    )

    async def run() -> list[str]:
        server = GatewayServer(config)
        with capture_logs() as logs:
            await server.start()
        await server.stop(grace=1)
        return [e["event"] for e in logs]

    assert "gateway.plaintext_listener_exposed" not in asyncio.run(run())


def test_every_served_request_goes_through_its_check_whatever_the_version(authorizer: Authorizer) -> None:
    """Each served (api, version), filled in every field (two items per array): the check
    answers or hands on a request the handler can take, and the answer encodes; only Kafka's
    connection close may be raised. As a principal with some ACLs and as a super user."""
    from protocol.codec import api_schema, encode_response
    from tests.test_error_response import SERVED, sample

    for api_key, version in SERVED:
        schema = api_schema(api_key, version)
        assert schema is not None
        req = sample(schema.request_type)
        for principal in ("User:alice", "User:admin"):
            stub = Stub(api_key)
            fn = checked(authorizer, api_key, stub, ["s", "orders"])
            try:
                resp = fn(ctx(principal), None, req)
            except CloseConnection:
                continue
            for got in stub.got:
                assert type(got) is type(req), (api_key, version)
            encode_response(schema, 1, resp)


def test_the_topic_filter_reaches_an_engine_context_made_before_it(authorizer: Authorizer) -> None:
    """A connection whose first group request was not a heartbeat (an OffsetCommit) still
    resolves its regexes through the filter once it heartbeats."""
    from gateway.groups.apis import engine_ctx

    c = ctx()
    assert engine_ctx(c, 1).topic_filter is None
    fn = checked(authorizer, 68, Stub(68))
    base = {
        "member_id": "m",
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": 30000,
        "subscribed_topic_names": None,
        "subscribed_topic_regex": "o.*",
        "server_assignor": None,
        "topic_partitions": [],
    }
    fn(c, None, make_request(68, 1, group_id="g-1", **base))
    keep = engine_ctx(c, 1).topic_filter
    assert keep is not None and keep("orders") and not keep("payments")


def test_an_api_switched_off_answers_before_it_authorizes(authorizer: Authorizer) -> None:
    stub = Stub(68)
    fn = wrap(Guard(authorizer, FakePlane([])), 68, stub, lambda: False)  # type: ignore[arg-type]
    req = make_request(
        68, 1, group_id="not-allowed", member_id="m", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout=30000, subscribed_topic_names=[], subscribed_topic_regex=None,
        server_assignor=None, topic_partitions=[],
    )  # fmt: skip
    fn(ctx("User:bob"), None, req)
    assert stub.got == [req]  # the handler answers (UNSUPPORTED_VERSION), no refusal first


def test_client_assignment_extension_apis_need_read_on_the_group(authorizer: Authorizer) -> None:
    """groupshift's PrepareAssignment / InstallAssignment (docs/client-side-assignors.md)."""
    from protocol import client_assignment_wire as caw

    for key, req, ok in (
        (
            caw.PREPARE_ASSIGNMENT_KEY,
            lambda g: caw.PrepareAssignmentRequest(g, "m", 0),
            caw.PrepareAssignmentResponse(),
        ),
        (
            caw.INSTALL_ASSIGNMENT_KEY,
            lambda g: caw.InstallAssignmentRequest(g, "m", 0, 1, 0, ()),
            caw.InstallAssignmentResponse(),
        ),
    ):
        stub = Stub(key, answer=lambda r, ok=ok: ok)
        fn = checked(authorizer, key, stub)
        assert fn(ctx(), None, req("g-ok")).error_code == 0 and len(stub.got) == 1
        denied = fn(ctx(), None, req("g-secret"))
        assert denied.error_code == ErrorCode.group_authorization_failed and len(stub.got) == 1
        assert type(denied) is type(ok)


def test_streams_topology_description_update_needs_read_on_the_group(authorizer: Authorizer) -> None:
    """Kafka 4.4 `KafkaApis.handleStreamsGroupTopologyDescriptionUpdate`: READ on the group, else
    GROUP_AUTHORIZATION_FAILED with no message (`ApiError.fromThrowable` drops the default one)."""
    stub = Stub(93)
    fn = checked(authorizer, 93, stub)
    push = {
        "member_id": "m",
        "topology_epoch": 0,
        "topology_description": {"subtopologies": [], "global_stores": []},
    }
    r = fn(ctx(), None, make_request(93, 0, group_id="g-app", **push))
    assert r.error_code == ErrorCode.none and len(stub.got) == 1
    r = fn(ctx(), None, make_request(93, 0, group_id="g-secret", **push))
    assert isinstance(r, StreamsGroupTopologyDescriptionUpdateResponse)
    assert (r.error_code, r.error_message) == (ErrorCode.group_authorization_failed, None)
    assert len(stub.got) == 1
    r = fn(ctx("User:bob"), None, make_request(93, 0, group_id="g-app", **push))
    assert r.error_code == ErrorCode.group_authorization_failed

"""Upstream mode's `gateway` identity (issue 29): groupshift's ACLs decide, for the forwarded
data plane as for the group APIs it answers itself.

One PLAINTEXT Kafka 4.4 as the upstream cluster, and in front of it a groupshift with a SASL_SSL
listener (PLAIN users admin, alice, bob, carol; StandardAuthorizer, `super.users=User:admin`);
the ACLs are created through groupshift with Kafka's CreateAcls (confluent-kafka's AdminClient
as admin), so they are groupshift's, not the cluster's (which has no authorizer at all).

* Real clients (confluent-kafka, librdkafka): alice without READ on the group is refused the
  group; with READ on the group but only DESCRIBE on the topic her fetches are refused
  (TOPIC_AUTHORIZATION_FAILED); with both she consumes everything; bob without WRITE cannot
  produce; Metadata hides from bob the topic he may not DESCRIBE.
* Differential, answer by answer, against a secured Kafka 4.4 that serves the same APIs itself
  with the same users and ACLs (e2e/secured_pair.py's SASL_SSL node, the oracle): Metadata,
  auto-creation, ListOffsets, Fetch, Produce, CreateTopics, InitProducerId (scenarios of
  e2e/test_differential_acls.py, and a mixed Produce here), and the delegation-token APIs, which
  both refuse (tokens are not enabled) while groupshift does not advertise them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import Gateways
from e2e.differential import Session, compare, plain, run_both
from e2e.harness import GatewayProcess
from e2e.secured_pair import USERS, plain_login, sasl_groupshift_sets, start_kafka
from e2e.test_differential_acls import SCENARIOS, TOPIC, WRITE, binding, grant, topic
from e2e.tls_certs import Authority
from e2e.upstream import FAST_UPSTREAM_SETTINGS
from harness.kafka_dist.cluster import KafkaCluster
from harness.kafka_dist.security import password_of
from protocol.client_security import ClientSecurity
from records.batch import build_batch

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

FORWARDED_SCENARIOS = (
    "scenario_metadata_topic_describe",
    "scenario_metadata_auto_create_needs_create",
    "scenario_produce_and_list_offsets",
    "scenario_fetch_topic_read",
    "scenario_create_topics_per_topic_create",
    "scenario_init_producer_id",
)


@dataclass(frozen=True)
class Setup:
    oracle: str
    groupshift: GatewayProcess
    ca: Authority
    identities: dict[str, ClientSecurity]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    base = Path(tmp_path_factory.mktemp("upstream-gateway-acls"))
    upstream = KafkaCluster("4.4", configs={"offsets.topic.num.partitions": "4"}, workdir=base / "upstream")
    upstream.start()
    oracle = start_kafka(base / "oracle")
    security = oracle.security
    assert security is not None
    gateways = Gateways(base / "groupshift")
    try:
        server = security.ca.issue("groupshift", "localhost", server=True)
        sets = [*FAST_UPSTREAM_SETTINGS, *sasl_groupshift_sets(security.ca, server)]
        gw = GatewayProcess.start(
            gateways.base / "gw", sets=tuple(sets), extra_args=("--upstream", upstream.bootstrap)
        )
        gateways.started.append(gw)
        identities = {u: plain_login(security.ca, u) for u in USERS}
        identities["default"] = identities["admin"]
        yield Setup(oracle.bootstrap, gw, security.ca, identities)
    finally:
        oracle.stop()
        upstream.stop()
        problems = gateways.finish()
        if problems:
            raise AssertionError("\n\n".join(problems))


def conf(s: Setup, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": s.groupshift.bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(s.ca.pem),
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": password_of(user),
    }


def consume(
    s: Setup, user: str, topic_name: str, group: str, want: int, seconds: float
) -> tuple[int, list[str]]:
    """(records read, error names seen) for a KIP-848 consumer of `user`."""
    from confluent_kafka import Consumer

    c = Consumer(
        {**conf(s, user), "group.id": group, "group.protocol": "consumer", "auto.offset.reset": "earliest"}
    )
    c.subscribe([topic_name])
    read, errors = 0, []
    deadline = time.monotonic() + seconds
    try:
        while read < want and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                errors.append(m.error().name())
                if m.error().fatal() or len(errors) > 20:
                    break
                continue
            read += 1
    finally:
        c.close()
    return read, errors


def test_real_clients_are_authorized_by_groupshift(setup: Setup) -> None:
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    t, g = f"orders-{uuid.uuid4().hex[:6]}", f"alice-app-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(conf(setup, "admin"))
    admin.create_topics([NewTopic(t, 3, 1)])[t].result(timeout=60)
    producer = Producer(conf(setup, "admin"))
    for i in range(12):
        producer.produce(t, f"v{i}".encode())
    assert producer.flush(30) == 0

    def allow(rtype: Any, name: str, op: Any) -> None:
        acl = AclBinding(
            rtype, name, ResourcePatternType.LITERAL, "User:alice", "*", op, AclPermissionType.ALLOW
        )
        for f in admin.create_acls([acl]).values():
            f.result(timeout=30)

    # no READ on the group: refused the group
    read, errors = consume(setup, "alice", t, g, 12, 6)
    assert read == 0 and "GROUP_AUTHORIZATION_FAILED" in errors, errors
    # READ on the group, DESCRIBE only on the topic: assigned, but every fetch refused
    allow(ResourceType.GROUP, g, AclOperation.READ)
    allow(ResourceType.TOPIC, t, AclOperation.DESCRIBE)
    read, errors = consume(setup, "alice", t, g, 12, 15)
    assert read == 0 and "TOPIC_AUTHORIZATION_FAILED" in errors, errors
    # READ on both: everything
    allow(ResourceType.TOPIC, t, AclOperation.READ)
    read, errors = consume(setup, "alice", t, g, 12, 60)
    assert read == 12, (read, errors)

    # bob: no WRITE, no DESCRIBE
    failures: list[Any] = []
    bob = Producer({**conf(setup, "bob"), "message.timeout.ms": 10000})
    bob.produce(t, b"nope", on_delivery=lambda err, msg: failures.append(err))
    bob.flush(20)
    assert [e.code() for e in failures] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], failures
    assert t not in AdminClient(conf(setup, "bob")).list_topics(timeout=20).topics
    assert t in AdminClient(conf(setup, "alice")).list_topics(timeout=20).topics


def scenario_produce_per_topic(s: Session) -> None:
    """Produce to a topic alice may WRITE and one she may not, in one request."""
    t_ok, t_no = topic(s, "pp-ok", 1), topic(s, "pp-no", 1)
    grant(s, binding(TOPIC, t_ok, "User:alice", WRITE))
    s.use("alice")
    batch = build_batch([(b"k", b"v")], timestamp_ms=int(time.time() * 1000))
    r = plain(
        s.raw(
            0,
            9,
            transactional_id=None,
            acks=-1,
            timeout=30000,
            topic_data=[
                {"name": name, "partition_data": [{"index": 0, "records": batch}]} for name in (t_no, t_ok)
            ],
        )
    )
    s.note(
        "produce",
        [
            (
                x["name"],
                [
                    (p["index"], p["error_code"], p["error_message"], p["base_offset"])
                    for p in x["partition_responses"]
                ],
            )
            for x in r["responses"]
        ],
    )


def scenario_delegation_tokens_refused(s: Session) -> None:
    """Tokens are not enabled on either: Kafka's refusal, principals filled in."""
    s.use("alice")
    s.call(
        38, 3, "create", owner_principal_type=None, owner_principal_name=None, renewers=[], max_lifetime=-1
    )
    s.call(41, 3, "describe", owners=None)
    s.call(39, 2, "renew", hmac=b"x", renew_period=-1)
    s.call(40, 2, "expire", hmac=b"x", expiry_time_period=-1)


SCENARIOS_HERE = {
    **{name: SCENARIOS[name] for name in FORWARDED_SCENARIOS},
    "scenario_produce_per_topic": scenario_produce_per_topic,
    "scenario_delegation_tokens_refused": scenario_delegation_tokens_refused,
}


@pytest.mark.parametrize("name", sorted(SCENARIOS_HERE))
def test_forwarded_apis_answer_as_kafka(name: str, setup: Setup) -> None:
    outcome = run_both(SCENARIOS_HERE[name], setup.oracle, setup.groupshift.bootstrap, setup.identities)
    compare(outcome, {})


def test_delegation_token_apis_are_not_advertised(setup: Setup) -> None:
    from protocol.client import make_request

    with setup.identities["alice"].connect("127.0.0.1", setup.groupshift.port, timeout=30) as c:
        keys = {
            int(a.api_key)
            for a in c.request(
                make_request(18, 3, client_software_name="t", client_software_version="1")
            ).api_keys
        }
    assert not keys & {38, 39, 40, 41}, sorted(keys)
    assert {0, 1, 3, 29, 30, 31} <= keys  # forwarded data plane, groupshift's own ACL APIs

"""Upstream mode's `gateway` identity (issue 29): groupshift's ACLs decide, for the forwarded
data plane as for the group APIs it answers itself.

One Kafka 4.4 as the upstream cluster, its only listener SASL_SSL with StandardAuthorizer
(harness.kafka_dist.security; groupshift logs in with SCRAM-SHA-512 as its super user `admin`),
and in front of it a groupshift with a SASL_SSL listener (PLAIN users admin, alice, bob, carol;
StandardAuthorizer, `super.users=User:admin`); the ACLs are created through groupshift with
Kafka's CreateAcls (confluent-kafka's AdminClient as admin), so they are groupshift's, not the
cluster's (where alice, bob and carol do not even exist).

* Real clients: alice without READ on the group is refused the group; with READ on the group
  but only DESCRIBE on the topic her fetches are refused (TOPIC_AUTHORIZATION_FAILED); with both
  she consumes everything. With librdkafka's KIP-848 consumer (confluent-kafka), and with a
  topic and group of their own each: librdkafka's classic consumer, Kafka's Java consumer
  (VerifiableConsumer, KIP-848, `--consumer.config` with SASL_SSL) and kafka-python (classic).
  Bob without WRITE cannot produce; Metadata hides from bob the topic he may not DESCRIBE.
* Differential, answer by answer, against a secured Kafka 4.4 that serves the same APIs itself
  with the same users and ACLs (e2e/secured_pair.py's SASL_SSL node, the oracle): Metadata,
  auto-creation, ListOffsets, Fetch, Produce, CreateTopics, InitProducerId (scenarios of
  e2e/test_differential_acls.py, and a mixed Produce here), and the delegation-token APIs, which
  both refuse (tokens are not enabled) while groupshift does not advertise them.
"""

from __future__ import annotations

import contextlib
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
from e2e.librdkafka_polling import poll_records
from e2e.secured_pair import USERS, plain_login, sasl_groupshift_sets, start_kafka
from e2e.test_differential_acls import SCENARIOS, TOPIC, WRITE, binding, grant, topic
from e2e.tls_certs import Authority
from e2e.upstream import FAST_UPSTREAM_SETTINGS
from harness.kafka_dist.cluster import KafkaCluster
from harness.kafka_dist.java_clients import JavaClients
from harness.kafka_dist.security import password_of
from protocol.client import make_request
from protocol.client_security import ClientSecurity
from records.batch import build_batch

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"

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
    upstream = KafkaCluster(
        "4.4",
        configs={"offsets.topic.num.partitions": "4"},
        workdir=base / "upstream",
        security="sasl_ssl",
        users=("admin",),
    )
    upstream.start()
    assert upstream.security is not None
    upstream_sets = [
        "upstream.security.protocol=SASL_SSL",
        "upstream.ssl.truststore.type=PEM",
        f"upstream.ssl.truststore.location={upstream.security.ca.pem}",
        "upstream.sasl.mechanism=SCRAM-SHA-512",
        f"upstream.sasl.jaas.config={SCRAM_MODULE} required "
        f'username="admin" password="{password_of("admin")}";',
    ]
    oracle = start_kafka(base / "oracle")
    security = oracle.security
    assert security is not None
    gateways = Gateways(base / "groupshift")
    try:
        server = security.ca.issue("groupshift", "localhost", server=True)
        sets = [*FAST_UPSTREAM_SETTINGS, *upstream_sets, *sasl_groupshift_sets(security.ca, server)]
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
    s: Setup,
    user: str,
    topic_name: str,
    group: str,
    want: int,
    seconds: float,
    until: str | None = None,
    protocol: str = "consumer",
) -> tuple[int, list[str]]:
    """(records read, error names seen) for a librdkafka consumer of `user` (`protocol`: KIP-848
    `consumer` or `classic`), stopping early once an error named `until` is seen."""
    from confluent_kafka import Consumer

    c = Consumer(
        {**conf(s, user), "group.id": group, "group.protocol": protocol, "auto.offset.reset": "earliest"}
    )
    c.subscribe([topic_name])
    try:
        return poll_records(c, want, seconds, until)
    finally:
        c.close()


def consume_kafka_python(
    s: Setup, user: str, topic_name: str, group: str, want: int, seconds: float, until: str | None = None
) -> tuple[int, list[str]]:
    """As `consume`, with kafka-python's classic consumer; its errors are raised by `poll`, named
    by Kafka's error name (`message`)."""
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    sec = s.identities[user]
    c = KafkaConsumer(
        topic_name,
        group_id=group,
        bootstrap_servers=s.groupshift.bootstrap,
        security_protocol="SASL_SSL",
        ssl_context=sec.ssl_context,
        sasl_mechanism="PLAIN",
        sasl_plain_username=user,
        sasl_plain_password=password_of(user),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    read, errors = 0, []
    deadline = time.monotonic() + seconds
    try:
        while read < want and time.monotonic() < deadline:
            try:
                batch = c.poll(timeout_ms=500)
            except KafkaError as e:
                errors.append(str(getattr(e, "message", type(e).__name__)))
                if len(errors) > 20 or errors[-1] == until:
                    break
                time.sleep(0.2)
                continue
            read += sum(len(records) for records in batch.values())
    finally:
        c.close()
    return read, errors


JAVA_ERRORS = {
    "GroupAuthorizationException": "GROUP_AUTHORIZATION_FAILED",
    "TopicAuthorizationException": "TOPIC_AUTHORIZATION_FAILED",
}


def consume_java(
    s: Setup, clients: JavaClients, user: str, topic_name: str, group: str, want: int, seconds: float
) -> tuple[int, list[str]]:
    """As `consume`, with Kafka's Java consumer (VerifiableConsumer, KIP-848) on SASL_SSL through
    `--consumer.config`. An authorization exception ends the tool (it is not retriable): its
    name in the tool's stderr is mapped to Kafka's error name."""
    props = {
        "security.protocol": "SASL_SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(s.ca.pem),
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{PLAIN_MODULE} required username="{user}" password="{password_of(user)}";',
    }
    with (
        clients.verifiable_consumer(
            s.groupshift.bootstrap,
            topic_name,
            group,
            group_protocol="consumer",
            max_messages=want,
            properties=props,
        ) as tool,
        contextlib.suppress(TimeoutError),
    ):
        tool.events_until_exit(seconds)
    stderr = tool.stderr_tail(400)
    read = sum(int(e.get("count", 0)) for e in tool.events if e.get("name") == "records_consumed")
    return read, [name for java, name in JAVA_ERRORS.items() if java in stderr]


def allow(admin: Any, rtype: Any, name: str, op: Any, principal: str = "User:alice") -> None:
    from confluent_kafka.admin import AclBinding, AclPermissionType, ResourcePatternType

    acl = AclBinding(rtype, name, ResourcePatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW)
    for f in admin.create_acls([acl]).values():
        f.result(timeout=30)


def wait_topic_described(s: Setup, user: str, t: str, seconds: float = 30.0) -> None:
    """Return once every broker the listener advertises answers `user`'s Metadata of `t` with no
    error. On a KRaft cluster CreateAcls answers once the controller has the ACL; each broker
    applies it from the metadata log on its own time, so a client's first Metadata can still
    meet TOPIC_AUTHORIZATION_FAILED. kafka-python keeps such an answer until its next metadata
    refresh (minutes), so without this wait the next case would test a stale refusal."""
    security = s.identities[user]
    host, port = s.groupshift.bootstrap.rsplit(":", 1)
    with contextlib.closing(security.connect(host, int(port), timeout=30.0)) as c:
        brokers = [(b.host, b.port) for b in c.request(make_request(3, 4, topics=None)).brokers]
    deadline = time.monotonic() + seconds
    for broker_host, broker_port in brokers:
        with contextlib.closing(security.connect(broker_host, broker_port, timeout=30.0)) as c:
            while True:
                answer = c.request(make_request(3, 4, topics=[{"name": t}], allow_auto_topic_creation=False))
                codes = [x.error_code for x in answer.topics]
                if codes == [0]:
                    break
                assert time.monotonic() < deadline, (broker_host, broker_port, codes)
                time.sleep(0.2)


def topic_with_records(s: Setup, prefix: str, records: int = 12) -> tuple[str, str, Any]:
    """A new 3-partition topic holding `records` records (written by admin) and a group name
    for it; and admin's AdminClient."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    t, g = f"{prefix}-{uuid.uuid4().hex[:6]}", f"{prefix}-app-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(conf(s, "admin"))
    admin.create_topics([NewTopic(t, 3, 1)])[t].result(timeout=60)
    producer = Producer(conf(s, "admin"))
    for i in range(records):
        producer.produce(t, f"v{i}".encode())
    assert producer.flush(30) == 0
    return t, g, admin


def test_real_clients_are_authorized_by_groupshift(setup: Setup) -> None:
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AclOperation, AdminClient, ResourceType

    t, g, admin = topic_with_records(setup, "orders")
    # no READ on the group: refused the group
    read, errors = consume(setup, "alice", t, g, 12, 30, "GROUP_AUTHORIZATION_FAILED")
    assert read == 0 and "GROUP_AUTHORIZATION_FAILED" in errors, errors
    # READ on the group, DESCRIBE only on the topic: assigned, but every fetch refused
    allow(admin, ResourceType.GROUP, g, AclOperation.READ)
    allow(admin, ResourceType.TOPIC, t, AclOperation.DESCRIBE)
    read, errors = consume(setup, "alice", t, g, 12, 30, "TOPIC_AUTHORIZATION_FAILED")
    assert read == 0 and "TOPIC_AUTHORIZATION_FAILED" in errors, errors
    # READ on both: everything
    allow(admin, ResourceType.TOPIC, t, AclOperation.READ)
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


def read_as(
    s: Setup,
    client: str,
    java: JavaClients | None,
    user: str,
    t: str,
    g: str,
    want: int,
    seconds: float,
    until: str | None,
) -> tuple[int, list[str]]:
    """(records read, error names seen) for `client`'s consumer (see the parametrization)."""
    if client.startswith("librdkafka"):
        protocol = "classic" if client == "librdkafka-classic" else "consumer"
        return consume(s, user, t, g, want, seconds, until, protocol=protocol)
    if client == "kafka-python-classic":
        return consume_kafka_python(s, user, t, g, want, seconds, until)
    assert java is not None
    return consume_java(s, java, user, t, g, want, seconds)


@pytest.mark.parametrize("client", ["librdkafka-classic", "java-kip848", "kafka-python-classic"])
def test_the_three_cases_with_more_clients(setup: Setup, client: str, request: pytest.FixtureRequest) -> None:
    """Issue 29's three cases in the `gateway` identity with the clients the test above leaves
    out: refused the group without READ on it, refused the fetches without READ on the topic,
    everything with both."""
    java: JavaClients | None = (
        request.getfixturevalue("kafka_clients4") if client.startswith("java") else None
    )
    three_cases(setup, client, java)


def three_cases(setup: Setup, client: str, java: JavaClients | None) -> None:
    """alice, with `client` (see `read_as`), on a topic and group of her own: refused the group
    without READ on it; with READ on the group and DESCRIBE only on the topic, refused the
    fetches; with READ on both, reads every record."""
    from confluent_kafka.admin import AclOperation, ResourceType

    t, g, admin = topic_with_records(setup, client)
    # The refusals end the read as soon as they are seen; the long window only matters on a
    # loaded machine, where a classic join and its first fetch can take more than 30 s.
    read, errors = read_as(setup, client, java, "alice", t, g, 12, 60, "GROUP_AUTHORIZATION_FAILED")
    print(f"{client}: group refused: {read} read, errors {errors}")
    assert read == 0 and "GROUP_AUTHORIZATION_FAILED" in errors, (client, errors)
    allow(admin, ResourceType.GROUP, g, AclOperation.READ)
    allow(admin, ResourceType.TOPIC, t, AclOperation.DESCRIBE)
    wait_topic_described(setup, "alice", t)
    read, errors = read_as(setup, client, java, "alice", t, g, 12, 60, "TOPIC_AUTHORIZATION_FAILED")
    print(f"{client}: topic refused: {read} read, errors {errors}")
    assert read == 0 and "TOPIC_AUTHORIZATION_FAILED" in errors, (
        client,
        errors,
        setup.groupshift.log_tail(60),
    )
    allow(admin, ResourceType.TOPIC, t, AclOperation.READ)
    read, errors = read_as(setup, client, java, "alice", t, g, 12, 60, None)
    print(f"{client}: both granted: {read} read, errors {errors}")
    assert read == 12, (client, read, errors)


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

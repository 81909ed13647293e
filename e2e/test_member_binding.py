"""The take-over test (issue 26 point 5; docs/deviations.md, "Member binding"): a second principal
that can reach a group sends a victim's member id over the raw wire. groupshift refuses every
such request (UNKNOWN_MEMBER_ID) while the victim keeps its partitions, and audits it as
`acl.denied`; a real Kafka 4.x node accepts the same bytes, which is the declared deviation.

The victim is a real client (confluent-kafka, KIP-848 and classic) authenticated by a client
certificate on a mutual-TLS listener; the attackers are another certificate on the same listener
and an ANONYMOUS client on the PLAINTEXT one, speaking through `protocol.client.WireClient`.
Kafka has no binding, so its half needs no TLS: any principal is accepted there.
"""

from __future__ import annotations

import ssl
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from e2e.tls_certs import PASSWORD, Authority, Issued
from harness.kafka_dist.cluster import KafkaCluster
from protocol.client import WireClient, make_request

pytestmark = pytest.mark.e2e

UNKNOWN_MEMBER_ID = 25
ALICE = "User:alice@eng"
MALLORY = "User:mallory@eng"
REASON = "member id bound to another principal"


@dataclass(frozen=True)
class Certs:
    ca: Authority
    server: Issued
    alice: Issued  # the victim
    mallory: Issued  # the attacker: trusted by the same CA, allowed on the same listener


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    ca = Authority(tmp_path_factory.mktemp("certs"), "binding")
    return Certs(
        ca=ca,
        server=ca.issue("server", "localhost", server=True),
        alice=ca.issue("alice", "alice", ou="eng"),
        mallory=ca.issue("mallory", "mallory", ou="eng"),
    )


@pytest.fixture(scope="module")
def gw(module_gateways: Gateways, certs: Certs) -> GatewayProcess:
    mtls = "listener.name.mtls."
    return module_gateways.start(
        "binding",
        sets=[
            "listeners=MTLS://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
            "listener.security.protocol.map=MTLS:SSL,PLAINTEXT:PLAINTEXT",
            f"{mtls}ssl.keystore.type=PEM",
            f"{mtls}ssl.keystore.location={certs.server.pem}",
            f"{mtls}ssl.truststore.type=PKCS12",
            f"{mtls}ssl.truststore.location={certs.ca.p12}",
            f"{mtls}ssl.truststore.password={PASSWORD}",
            f"{mtls}ssl.client.auth=required",
            f"{mtls}ssl.principal.mapping.rules=RULE:^CN=(.*?),OU=(.*?),O=.*$/$1@$2/L,DEFAULT",
            "group.consumer.heartbeat.interval.ms=500",
            "group.consumer.min.heartbeat.interval.ms=100",
            "group.initial.rebalance.delay.ms=0",
            "group.min.session.timeout.ms=1000",
            "metrics.listen=127.0.0.1:0",
        ],
    )


def ports(gw: GatewayProcess) -> dict[str, int]:
    return {k: int(v) for k, v in gw.events("gateway.listening")[-1]["ports"].items()}


def tls_context(certs: Certs, who: Issued) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs.ca.pem))
    ctx.load_cert_chain(str(who.cert), str(who.key))
    return ctx


def confluent_tls(certs: Certs, who: Issued) -> dict[str, Any]:
    return {
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca.pem),
        "ssl.certificate.location": str(who.cert),
        "ssl.key.location": str(who.key),
    }


def create_topic(bootstrap: str, partitions: int = 2) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"bind-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    return topic


@pytest.fixture
def victim_factory() -> Iterator[Any]:
    """Victim consumers (confluent-kafka), closed at the end of the test."""
    from confluent_kafka import Consumer

    made: list[Any] = []

    def make(bootstrap: str, group: str, topic: str, protocol: str, tls: dict[str, Any]) -> Any:
        conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **tls,
        }
        if protocol == "classic":
            conf["session.timeout.ms"] = 6000
            conf["heartbeat.interval.ms"] = 500
        consumer = Consumer(conf)
        made.append(consumer)
        consumer.subscribe([topic])
        return consumer

    yield make
    for c in made:
        c.close()


def owned(consumer: Any) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in consumer.assignment()}


def poll_for(consumer: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        consumer.poll(0.2)


def wait_owning(consumer: Any, want: set[tuple[str, int]], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while owned(consumer) != want and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert owned(consumer) == want


def describe_consumer_group(c: WireClient, group: str) -> Any:
    r = c.request(make_request(69, 0, group_ids=[group], include_authorized_operations=False))
    (g,) = r.groups
    assert g.error_code == 0, g
    return g


def describe_classic_group(c: WireClient, group: str) -> Any:
    r = c.request(make_request(15, 5, groups=[group], include_authorized_operations=False))
    (g,) = r.groups
    assert g.error_code == 0, g
    return g


def heartbeat_as(c: WireClient, group: str, member_id: str, epoch: int, topic: str) -> Any:
    """A full ConsumerGroupHeartbeat under the victim's id, owning nothing: Kafka answers it as the
    victim's own, with the victim's assignment."""
    return c.request(
        make_request(
            68,
            0,
            group_id=group,
            member_id=member_id,
            member_epoch=epoch,
            instance_id=None,
            rack_id=None,
            rebalance_timeout=30000,
            subscribed_topic_names=[topic],
            server_assignor=None,
            topic_partitions=[],
        )
    )


def leave_as(c: WireClient, group: str, member_id: str) -> Any:
    return c.request(
        make_request(13, 4, group_id=group, members=[{"member_id": member_id, "group_instance_id": None}])
    )


def commit_as(c: WireClient, group: str, member_id: str, epoch: int, topic: str, version: int) -> Any:
    return c.request(
        make_request(
            8,
            version,
            group_id=group,
            generation_id_or_member_epoch=epoch,
            member_id=member_id,
            group_instance_id=None,
            topics=[
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 999,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        )
    )


def refused(gw: GatewayProcess, group: str) -> list[tuple[str, str]]:
    """(principal, API) of each refusal the coordinator logged for `group`, in order."""
    return [(e["principal"], e["api"]) for e in gw.events("member.binding_refused") if e["group"] == group]


def denials(gw: GatewayProcess) -> dict[str, float]:
    """`groupshift_acl_denials_total` by API (every refusal is counted; the `acl.denied` log line
    is rate-limited per principal and client address)."""
    out: dict[str, float] = {}
    for line in gw.metrics().splitlines():
        if line.startswith("groupshift_acl_denials_total{"):
            labels, value = line.rsplit(" ", 1)
            api = labels.split('api="', 1)[1].split('"', 1)[0]
            out[api] = out.get(api, 0) + float(value)
    return out


def audited(gw: GatewayProcess) -> set[str]:
    """The principals of the `acl.denied` lines that member binding wrote."""
    lines = [e for e in gw.events("acl.denied") if e.get("reason") == REASON]
    assert all((e["resource_type"], e["operation"]) == ("GROUP", "READ") for e in lines)
    return {e["principal"] for e in lines}


# --- groupshift refuses ---------------------------------------------------------------------------


def test_a_consumer_protocol_member_cannot_be_taken_over(
    gw: GatewayProcess, certs: Certs, victim_factory: Any
) -> None:
    p = ports(gw)
    topic = create_topic(f"127.0.0.1:{p['PLAINTEXT']}")
    group = f"g-{topic}"
    victim = victim_factory(
        f"127.0.0.1:{p['MTLS']}", group, topic, "consumer", confluent_tls(certs, certs.alice)
    )
    both = {(topic, 0), (topic, 1)}
    wait_owning(victim, both)
    counted = denials(gw)

    with (
        WireClient(p["MTLS"], ssl_context=tls_context(certs, certs.mallory)) as mallory,
        WireClient(p["PLAINTEXT"]) as anonymous,
    ):
        # Anyone who may describe the group learns the victim's member id and epoch.
        (member,) = describe_consumer_group(mallory, group).members
        member_id, epoch = member.member_id, member.member_epoch
        for attacker in (mallory, anonymous):
            r = heartbeat_as(attacker, group, member_id, epoch, topic)
            assert (r.error_code, r.assignment) == (UNKNOWN_MEMBER_ID, None)
            r = heartbeat_as(attacker, group, member_id, -1, topic)  # a leave in the victim's name
            assert r.error_code == UNKNOWN_MEMBER_ID
            r = commit_as(attacker, group, member_id, epoch, topic, version=9)
            assert [p.error_code for t in r.topics for p in t.partitions] == [UNKNOWN_MEMBER_ID]

        # The victim noticed nothing: same member, same epoch, same partitions.
        poll_for(victim, 2.0)
        assert owned(victim) == both
        (after,) = describe_consumer_group(mallory, group).members
        assert (after.member_id, after.member_epoch) == (member_id, epoch)
    cgh, commit = ("ConsumerGroupHeartbeat", "OffsetCommit")
    assert refused(gw, group) == [
        (who, api) for who in (MALLORY, "User:ANONYMOUS") for api in (cgh, cgh, commit)
    ]
    now = denials(gw)
    assert (now[cgh] - counted.get(cgh, 0), now[commit] - counted.get(commit, 0)) == (4, 2)
    assert {MALLORY, "User:ANONYMOUS"} <= audited(gw)


def test_a_classic_member_cannot_be_taken_over(gw: GatewayProcess, certs: Certs, victim_factory: Any) -> None:
    p = ports(gw)
    topic = create_topic(f"127.0.0.1:{p['PLAINTEXT']}")
    group = f"g-{topic}"
    victim = victim_factory(
        f"127.0.0.1:{p['MTLS']}", group, topic, "classic", confluent_tls(certs, certs.alice)
    )
    both = {(topic, 0), (topic, 1)}
    wait_owning(victim, both)
    counted = denials(gw)

    with WireClient(p["MTLS"], ssl_context=tls_context(certs, certs.mallory)) as mallory:
        described = describe_classic_group(mallory, group)
        (member,) = described.members
        member_id = member.member_id
        join = mallory.request(
            make_request(
                11,
                7,
                group_id=group,
                session_timeout=6000,
                rebalance_timeout=30000,
                member_id=member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocols=[{"name": described.protocol_data, "metadata": bytes(member.member_metadata)}],
            )
        )
        assert join.error_code == UNKNOWN_MEMBER_ID
        hb = mallory.request(
            make_request(12, 4, group_id=group, generation_id=1, member_id=member_id, group_instance_id=None)
        )
        assert hb.error_code == UNKNOWN_MEMBER_ID
        sync = mallory.request(
            make_request(
                14,
                5,
                group_id=group,
                generation_id=1,
                member_id=member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocol_name=described.protocol_data,
                assignments=[],
            )
        )
        assert sync.error_code == UNKNOWN_MEMBER_ID
        assert leave_as(mallory, group, member_id).error_code == UNKNOWN_MEMBER_ID
        r = commit_as(mallory, group, member_id, 1, topic, version=8)
        assert [p.error_code for t in r.topics for p in t.partitions] == [UNKNOWN_MEMBER_ID]

        poll_for(victim, 2.0)
        assert owned(victim) == both
        again = describe_classic_group(mallory, group)
        assert (again.group_state, [m.member_id for m in again.members]) == ("Stable", [member_id])
    apis = ["JoinGroup", "Heartbeat", "SyncGroup", "LeaveGroup", "OffsetCommit"]
    assert refused(gw, group) == [(MALLORY, api) for api in apis]
    now = denials(gw)
    assert {api: now[api] - counted.get(api, 0) for api in apis} == dict.fromkeys(apis, 1)
    assert MALLORY in audited(gw)


# --- Kafka accepts: the declared deviation -------------------------------------------------------


def test_kafka_accepts_the_same_take_over(kafka4: KafkaCluster, victim_factory: Any) -> None:
    """No principal needed on Kafka's side: it checks READ on the group, never whose member id a
    request carries."""
    topic = create_topic(kafka4.bootstrap)
    port = kafka4.port()

    group = f"g-{topic}"
    victim = victim_factory(kafka4.bootstrap, group, topic, "consumer", {})
    wait_owning(victim, {(topic, 0), (topic, 1)})
    with WireClient(port) as attacker:
        (member,) = describe_consumer_group(attacker, group).members
        r = heartbeat_as(attacker, group, member.member_id, member.member_epoch, topic)
        # Accepted as the victim's own heartbeat, and answered with the victim's partitions.
        assert (r.error_code, r.member_id) == (0, member.member_id)
        assert r.assignment is not None
        assert sorted(p for tp in r.assignment.topic_partitions for p in tp.partitions) == [0, 1]

    classic = f"c-{topic}"
    victim = victim_factory(kafka4.bootstrap, classic, topic, "classic", {})
    wait_owning(victim, {(topic, 0), (topic, 1)})
    with WireClient(port) as attacker:
        (member,) = describe_classic_group(attacker, classic).members
        r = leave_as(attacker, classic, member.member_id)
        # Kafka removes the victim on the attacker's word.
        assert (r.error_code, [m.error_code for m in r.members]) == (0, [0])
        assert member.member_id not in [
            m.member_id for m in describe_classic_group(attacker, classic).members
        ]

"""SASL and Kafka's ACLs together: the principal a SASL login gives (`User:<name>`) is the one the
authorizer decides on (docs/security.md). One gateway with a SASL_PLAINTEXT listener (PLAIN)
and `authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`, super user
`User:admin`:

- the SASL exchange itself is never refused by the authorizer (SaslHandshake and
  SaslAuthenticate are answered before authorization, as in Kafka);
- alice, with no ACL, cannot consume (confluent-kafka with group.protocol=consumer sees
  authorization errors); once admin grants READ on the topic and the group with Kafka's
  CreateAcls (confluent-kafka's AdminClient), alice consumes everything; bob still cannot;
- the SCRAM credential APIs need DESCRIBE / ALTER on the CLUSTER: alice is refused with
  CLUSTER_AUTHORIZATION_FAILED, admin is not.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from e2e.librdkafka_polling import poll_records

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def gw(module_gateways: Gateways) -> Iterator[GatewayProcess]:
    users = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    jaas = f'{PLAIN_MODULE} required username="admin" password="admin-secret" {users};'
    sets = [
        "listeners=SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=PLAIN",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:admin",
        "group.initial.rebalance.delay.ms=0",
    ]
    yield module_gateways.start("sasl-acls", sets=sets)


def conf(gw: GatewayProcess, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": gw.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


def consume(
    gw: GatewayProcess, user: str, topic: str, group: str, want: int, seconds: float
) -> tuple[int, list[str]]:
    """(records read, error names seen) for a KIP-848 consumer of `user`."""
    from confluent_kafka import Consumer

    c = Consumer(
        {
            **conf(gw, user),
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    try:
        return poll_records(c, want, seconds)
    finally:
        c.close()


def test_sasl_principals_are_what_the_authorizer_decides_on(gw: GatewayProcess) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    topic, group = f"orders-{uuid.uuid4().hex[:6]}", "alice-app"
    admin = AdminClient(conf(gw, "admin"))
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(timeout=60)
    producer = Producer(conf(gw, "admin"))
    for i in range(12):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0

    read, errors = consume(gw, "alice", topic, group, 12, 8)
    assert read == 0 and errors, (read, errors)
    assert any("AUTHORIZATION_FAILED" in e for e in errors), errors

    acls = [
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, "User:alice", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
    ]  # fmt: skip
    for f in admin.create_acls(acls).values():
        f.result(timeout=30)
    read, errors = consume(gw, "alice", topic, group, 12, 60)
    assert read == 12, (read, errors)
    read, errors = consume(gw, "bob", topic, "bob-app", 12, 8)
    assert read == 0 and any("AUTHORIZATION_FAILED" in e for e in errors), (read, errors)


def wire(gw: GatewayProcess, user: str) -> Any:
    """A raw connection logged in as `user` (protocol.client_security: SaslHandshake v1 and
    SaslAuthenticate, as Kafka's clients do)."""
    from protocol.client_security import ClientSecurity

    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{PLAIN_MODULE} required username="{user}" password="{USERS[user]}";',
    }
    return ClientSecurity.from_properties(props).connect("127.0.0.1", gw.port, timeout=30)


def test_scram_credential_apis_need_the_cluster(gw: GatewayProcess) -> None:
    from protocol.client import make_request

    upsert = make_request(
        51,
        0,
        deletions=[],
        upsertions=[
            {
                "name": "carol",
                "mechanism": 1,
                "iterations": 4096,
                "salt": b"s" * 16,
                "salted_password": b"p" * 32,
            }
        ],
    )
    describe = make_request(50, 0, users=[{"name": "carol"}])
    with wire(gw, "alice") as alice:
        d = alice.request(describe)
        assert (d.error_code.name, d.results) == ("cluster_authorization_failed", ()), d
        (r,) = alice.request(upsert).results
        assert (r.user, r.error_code.name) == ("carol", "cluster_authorization_failed"), r
    with wire(gw, "admin") as admin:
        (r,) = admin.request(upsert).results
        assert r.error_code.name == "none", r
        (d,) = admin.request(describe).results
        assert (d.user, d.error_code.name) == ("carol", "none"), d
        assert [(c.mechanism, c.iterations) for c in d.credential_infos] == [(1, 4096)], d

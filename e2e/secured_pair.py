"""A real Kafka 4.x node and a groupshift server, both with a mutual-TLS listener and Kafka's
StandardAuthorizer, the same principals (client certificates of one test CA, mapped to `User:<CN>`
by the same `ssl.principal.mapping.rules`) and `super.users=User:admin`, for the authorization
differential suite and the ACL e2e tests.

The Kafka node is the harness's secured cluster (`KafkaCluster(security="ssl")`,
harness/kafka_dist/security.py): client and controller listeners both mutual TLS, so nothing on
it is reachable without a certificate of its CA; groupshift's listener certificate and the
suite's client certificates come from that CA too.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from e2e.conftest import DIFFERENTIAL_GROUP_SETTINGS, KAFKA_ONLY, Gateways
from e2e.harness import GatewayProcess
from e2e.tls_certs import PASSWORD, Authority, Issued
from harness.kafka_dist.cluster import KafkaCluster
from harness.kafka_dist.security import AUTHORIZER, PRINCIPAL_MAPPING_RULES

KAFKA_VERSION = "4.4"
# `CN=alice,O=Example` (RFC 2253, as both servers print a subject) -> `alice`, as on the
# harness's secured Kafka.
MAPPING_RULES = PRINCIPAL_MAPPING_RULES
USERS = ("admin", "alice", "bob", "carol")


@dataclass(frozen=True)
class Certs:
    ca: Authority
    server: Issued
    users: dict[str, Issued]

    def context(self, user: str) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca.pem))
        issued = self.users[user]
        ctx.load_cert_chain(str(issued.cert), str(issued.key))
        return ctx

    def identities(self) -> dict[str, ssl.SSLContext]:
        """Client contexts by user; "default" is the super user (set-up)."""
        out = {u: self.context(u) for u in self.users}
        out["default"] = out["admin"]
        return out


def make_certs(directory: Path) -> Certs:
    ca = Authority(directory, "acl")
    return Certs(
        ca=ca,
        server=ca.issue("server", "localhost", server=True),
        users={u: ca.issue(u, u) for u in USERS},
    )


def groupshift_sets(certs: Certs, **extra: str) -> list[str]:
    settings = {
        "listeners": "SSL://127.0.0.1:0",
        "listener.security.protocol.map": "SSL:SSL",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(certs.server.p12),
        "ssl.keystore.password": PASSWORD,
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(certs.ca.p12),
        "ssl.truststore.password": PASSWORD,
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": MAPPING_RULES,
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        **DIFFERENTIAL_GROUP_SETTINGS,
        **extra,
    }
    return [f"{k}={v}" for k, v in settings.items()]


def start_groupshift(gateways: Gateways, certs: Certs, name: str = "acl", **extra: str) -> GatewayProcess:
    return gateways.start(name, sets=groupshift_sets(certs, **extra))


def start_kafka(workdir: Path) -> tuple[KafkaCluster, Certs]:
    """A Kafka node secured by the harness (`KafkaCluster(security="ssl")`: mutual-TLS client and
    controller listeners, StandardAuthorizer, `super.users=User:admin;User:broker`), and the
    certificates of its CA for every user of the suite and for groupshift's listener."""
    cluster = KafkaCluster(
        KAFKA_VERSION,
        configs={**DIFFERENTIAL_GROUP_SETTINGS, **KAFKA_ONLY},
        workdir=workdir,
        security="ssl",
    )
    security = cluster.security
    assert security is not None
    cluster.start()
    ca = security.ca
    users = {u: security.user_certs.get(u) or ca.issue(u, u) for u in USERS}
    return cluster, Certs(ca=ca, server=ca.issue("groupshift", "localhost", server=True), users=users)


def secured_pair(base: Path) -> Iterator[tuple[str, str, Certs]]:
    """(kafka SSL bootstrap, groupshift SSL bootstrap, certs) for a module."""
    cluster, certs = start_kafka(base / "kafka")
    gateways = Gateways(base / "groupshift")
    try:
        gw = start_groupshift(gateways, certs)
        yield cluster.bootstrap, gw.bootstrap, certs
    finally:
        cluster.stop()
        problems = gateways.finish()
        if problems:
            raise AssertionError("\n\n".join(problems))

"""A real Kafka 4.x node and a groupshift server, both with a mutual-TLS listener and Kafka's
StandardAuthorizer, the same principals (client certificates of one test CA, mapped to `User:<CN>`
by the same `ssl.principal.mapping.rules`) and `super.users=User:admin`, for the authorization
differential suite and the ACL e2e tests.

The Kafka node is started with the harness's cluster API and server property overrides (an SSL
listener with PKCS12 stores and `ssl.client.auth=required`, next to the harness's own PLAINTEXT
and CONTROLLER listeners, which the harness uses for readiness and the node for its controller
link; their principal `User:ANONYMOUS` is a super user there, and no scenario speaks on them).
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from e2e.conftest import DIFFERENTIAL_GROUP_SETTINGS, KAFKA_ONLY, Gateways
from e2e.harness import GatewayProcess
from e2e.tls_certs import PASSWORD, Authority, Issued
from harness.kafka_dist.cluster import KafkaCluster, free_port

KAFKA_VERSION = "4.4"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# `CN=alice,O=Example` (RFC 2253, as both servers print a subject) -> `alice`.
MAPPING_RULES = "RULE:^CN=([^,]*),.*$/$1/,DEFAULT"
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
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:admin",
        **DIFFERENTIAL_GROUP_SETTINGS,
        **extra,
    }
    return [f"{k}={v}" for k, v in settings.items()]


def start_groupshift(gateways: Gateways, certs: Certs, name: str = "acl", **extra: str) -> GatewayProcess:
    return gateways.start(name, sets=groupshift_sets(certs, **extra))


def start_kafka(certs: Certs, workdir: Path) -> tuple[KafkaCluster, str]:
    """(the running cluster, its SSL listener's bootstrap)."""
    cluster = KafkaCluster(
        KAFKA_VERSION, configs={**DIFFERENTIAL_GROUP_SETTINGS, **KAFKA_ONLY}, workdir=workdir
    )
    node = cluster.nodes[0]
    ssl_port = free_port()
    prefix = "listener.name.ssl."
    cluster.configs.update(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port},"
            f"SSL://127.0.0.1:{ssl_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port},SSL://127.0.0.1:{ssl_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL",
            f"{prefix}ssl.keystore.type": "PKCS12",
            f"{prefix}ssl.keystore.location": str(certs.server.p12),
            f"{prefix}ssl.keystore.password": PASSWORD,
            f"{prefix}ssl.truststore.type": "PKCS12",
            f"{prefix}ssl.truststore.location": str(certs.ca.p12),
            f"{prefix}ssl.truststore.password": PASSWORD,
            f"{prefix}ssl.client.auth": "required",
            "ssl.principal.mapping.rules": MAPPING_RULES,
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": "User:admin;User:ANONYMOUS",
        }
    )
    cluster.start()
    return cluster, f"127.0.0.1:{ssl_port}"


def secured_pair(base: Path) -> Iterator[tuple[str, str, Certs]]:
    """(kafka SSL bootstrap, groupshift SSL bootstrap, certs) for a module."""
    certs = make_certs(base / "certs")
    cluster, kafka = start_kafka(certs, base / "kafka")
    gateways = Gateways(base / "groupshift")
    try:
        gw = start_groupshift(gateways, certs)
        yield kafka, gw.bootstrap, certs
    finally:
        cluster.stop()
        problems = gateways.finish()
        if problems:
            raise AssertionError("\n\n".join(problems))

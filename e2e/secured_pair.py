"""Secured set-ups for the authorization tests: Kafka's StandardAuthorizer with
`super.users=User:admin` behind two kinds of listener.

- The authorization differential suite (e2e/test_differential_acls.py, issue 26): a real Kafka 4.x
  node (KRaft, `KafkaCluster(security="sasl_ssl")`, harness/kafka_dist/security.py: SASL_SSL
  client and controller listeners) and a groupshift server with a SASL_SSL listener
  (gateway/sasl), both with the same PLAIN users `admin`, `alice`, `bob` and `carol` (password
  `<name>-secret`), so a PLAIN login gives the principal `User:<name>` on both, as Kafka's
  PlainSaslServer does. groupshift's listener certificate comes from the Kafka node's CA, so one
  client identity per user (`ClientSecurity`: TLS, then SaslHandshake and SaslAuthenticate)
  reaches both servers.
- The ACL e2e tests with real clients (e2e/test_acls.py): groupshift with a mutual-TLS listener,
  client certificates of one test CA mapped to `User:<CN>` by `ssl.principal.mapping.rules`, the
  certificate-identity path of the same authorizer.
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
from harness.kafka_dist.security import AUTHORIZER, PLAIN_LOGIN, PRINCIPAL_MAPPING_RULES, password_of
from protocol.client_security import ClientSecurity

KAFKA_VERSION = "4.4"
# `CN=alice,O=Example` (RFC 2253, as both servers print a subject) -> `alice`, as on the
# harness's secured Kafka.
MAPPING_RULES = PRINCIPAL_MAPPING_RULES
USERS = ("admin", "alice", "bob", "carol")
SUPER_USER = "admin"


# --- mutual TLS (e2e/test_acls.py) -----------------------------------------------------------------


@dataclass(frozen=True)
class Certs:
    """A test CA, groupshift's listener certificate and one client certificate per user."""

    ca: Authority
    server: Issued
    users: dict[str, Issued]

    def context(self, user: str) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca.pem))
        issued = self.users[user]
        ctx.load_cert_chain(str(issued.cert), str(issued.key))
        return ctx


def make_certs(directory: Path) -> Certs:
    ca = Authority(directory, "acl")
    return Certs(
        ca=ca,
        server=ca.issue("server", "localhost", server=True),
        users={u: ca.issue(u, u) for u in USERS},
    )


def _authorizer_settings(**extra: str) -> dict[str, str]:
    return {
        "authorizer.class.name": AUTHORIZER,
        "super.users": f"User:{SUPER_USER}",
        **DIFFERENTIAL_GROUP_SETTINGS,
        **extra,
    }


def mtls_groupshift_sets(certs: Certs, **extra: str) -> list[str]:
    """A mutual-TLS listener whose principals are the client certificates' CNs."""
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
        **_authorizer_settings(**extra),
    }
    return [f"{k}={v}" for k, v in settings.items()]


def start_mtls_groupshift(
    gateways: Gateways, certs: Certs, name: str = "acl", **extra: str
) -> GatewayProcess:
    return gateways.start(name, sets=mtls_groupshift_sets(certs, **extra))


# --- SASL_SSL with PLAIN logins (e2e/test_differential_acls.py) ------------------------------------


@dataclass(frozen=True)
class SaslPair:
    """Both servers' SASL_SSL bootstraps and how each user logs in to either of them."""

    kafka: str
    groupshift: str
    identities: dict[str, ClientSecurity]


def plain_login(ca: Authority, user: str) -> ClientSecurity:
    """TLS trusting `ca` (the name checked), then a PLAIN login as `user`."""
    return ClientSecurity(
        "SASL_SSL", ssl.create_default_context(cafile=str(ca.pem)), "PLAIN", user, password_of(user)
    )


def sasl_groupshift_sets(ca: Authority, server: Issued, **extra: str) -> list[str]:
    """A SASL_SSL listener serving PLAIN, its users those of the suite (as Kafka's
    PlainLoginModule reads `user_<name>="<password>"`)."""
    users = " ".join(f'user_{u}="{password_of(u)}"' for u in USERS)
    jaas = f'{PLAIN_LOGIN} required username="{SUPER_USER}" password="{password_of(SUPER_USER)}" {users};'
    settings = {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(server.p12),
        "ssl.keystore.password": PASSWORD,
        **_authorizer_settings(**extra),
    }
    return [f"{k}={v}" for k, v in settings.items()]


def start_kafka(workdir: Path) -> KafkaCluster:
    """A Kafka node secured by the harness (`KafkaCluster(security="sasl_ssl")`: SASL_SSL client
    and controller listeners, PLAIN and SCRAM users `USERS`, StandardAuthorizer,
    `super.users=User:admin;User:broker`)."""
    cluster = KafkaCluster(
        KAFKA_VERSION,
        configs={**DIFFERENTIAL_GROUP_SETTINGS, **KAFKA_ONLY},
        workdir=workdir,
        security="sasl_ssl",
        users=USERS,
    )
    cluster.start()
    return cluster


def sasl_pair(base: Path) -> Iterator[SaslPair]:
    """The Kafka node and groupshift, both SASL_SSL, for one module."""
    cluster = start_kafka(base / "kafka")
    security = cluster.security
    assert security is not None
    gateways = Gateways(base / "groupshift")
    try:
        server = security.ca.issue("groupshift", "localhost", server=True)
        gw = gateways.start("acl", sets=sasl_groupshift_sets(security.ca, server))
        identities = {u: plain_login(security.ca, u) for u in USERS}
        identities["default"] = identities[SUPER_USER]
        yield SaslPair(cluster.bootstrap, gw.bootstrap, identities)
    finally:
        cluster.stop()
        problems = gateways.finish()
        if problems:
            raise AssertionError("\n\n".join(problems))

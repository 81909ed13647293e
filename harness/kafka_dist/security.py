"""A secured reference Kafka: SSL (mutual TLS), SASL_PLAINTEXT or SASL_SSL listeners with Kafka's
StandardAuthorizer, and a client properties file per principal (`--command-config FILE`).

What a production cluster looks like, small: the client listener and the KRaft controller listener
both use the chosen security protocol, so nothing on the node is reachable without credentials;
`authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer` with
`allow.everyone.if.no.acl.found=false`, so a principal may do only what ACLs allow; `super.users`
holds `User:admin` (for setting up ACLs, users and topics) and `User:broker` (the principal of
inter-broker and broker-to-controller connections, which need CLUSTER_ACTION on the cluster).

- SSL: every node has one certificate (serverAuth and clientAuth, for 127.0.0.1 / localhost) from a
  CA made at start (harness.certificates); `ssl.client.auth=required`; each client principal gets
  its own certificate. `ssl.principal.mapping.rules` turns the subject `CN=alice,O=Example` into
  `User:alice`, so principals have the same names under every protocol.
- SASL_PLAINTEXT / SASL_SSL: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are enabled on the client
  listener. PLAIN's users are in the listener's `plain.sasl.jaas.config` (`user_NAME="password"`,
  as Kafka's PlainLoginModule reads them); SCRAM credentials are written into the metadata log when
  the storage is formatted (`kafka-storage format --add-scram`, KIP-900), so they exist before
  the first client connects. Brokers authenticate to each other and to the controllers with PLAIN
  (SCRAM cannot serve the controller listener: its credentials live in the metadata the
  controllers serve), `sasl.mechanism.controller.protocol=PLAIN`.

Passwords are `<name>-secret`: a local test fixture, not a deployment.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from protocol.client_security import ClientSecurity

SECURITY_CHOICES = ("ssl", "sasl_plaintext", "sasl_ssl")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SUPER_USER = "admin"
BROKER_USER = "broker"
CLIENT_USERS = ("admin", "alice", "bob")
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
# `CN=alice,O=Example` (RFC 2253, as Kafka reads the certificate's subject) -> `alice`
PRINCIPAL_MAPPING_RULES = "RULE:^CN=([^,]+),.*$/$1/,DEFAULT"


def password_of(user: str) -> str:
    return f"{user}-secret"


def _jaas(module: str, user: str) -> str:
    return f'{module} required username="{user}" password="{password_of(user)}";'


class KafkaSecurity:
    """The certificates, broker properties and client properties of one secured cluster.

    `security` is one of SECURITY_CHOICES; `mechanism` is the SASL mechanism the client
    properties files name (each is enabled on the broker); `users` the client principals
    (`admin` is always one: the super user).
    """

    def __init__(
        self,
        security: str,
        directory: Path,
        *,
        mechanism: str = "SCRAM-SHA-256",
        users: tuple[str, ...] = CLIENT_USERS,
    ) -> None:
        if security not in SECURITY_CHOICES:
            raise ValueError(f"--security must be one of {', '.join(SECURITY_CHOICES)}, not {security!r}")
        if mechanism not in SASL_MECHANISMS:
            raise ValueError(f"SASL mechanism must be one of {', '.join(SASL_MECHANISMS)}, not {mechanism!r}")
        self.protocol = security.upper()
        self.mechanism = mechanism
        self.users = tuple(dict.fromkeys((SUPER_USER, *users)))
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.uses_tls = self.protocol in ("SSL", "SASL_SSL")
        self.uses_sasl = self.protocol.startswith("SASL_")
        if self.uses_tls:
            try:
                from harness.certificates import PASSWORD, Authority
            except ImportError as exc:  # the `tls` extra
                raise ValueError(
                    f"--security {security} makes certificates with the `cryptography` package: "
                    "pip install 'groupshift[tls]'"
                ) from exc
            self.store_password = PASSWORD
            self.ca = Authority(directory, "kafka")
            self.broker_cert = self.ca.issue(BROKER_USER, BROKER_USER, server=True, client=True)
            self.user_certs = (
                {user: self.ca.issue(user, user) for user in self.users} if self.protocol == "SSL" else {}
            )
            self.user_certs[BROKER_USER] = self.broker_cert

    @property
    def listener_name(self) -> str:
        """The client listener's name: the protocol's own, as in Kafka's default map."""
        return self.protocol

    def broker_properties(self) -> dict[str, str]:
        """Server properties on top of the node's own (listeners and ports are the node's)."""
        p = self.protocol
        props: dict[str, str] = {
            "listener.security.protocol.map": f"{p}:{p},CONTROLLER:{p}",
            "inter.broker.listener.name": p,
            "authorizer.class.name": AUTHORIZER,
            "allow.everyone.if.no.acl.found": "false",
            "super.users": f"User:{SUPER_USER};User:{BROKER_USER}",
        }
        if self.uses_tls:
            props |= {
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": str(self.broker_cert.p12),
                "ssl.keystore.password": self.store_password,
                "ssl.key.password": self.store_password,
                "ssl.truststore.type": "PKCS12",
                "ssl.truststore.location": str(self.ca.p12),
                "ssl.truststore.password": self.store_password,
                "ssl.principal.mapping.rules": PRINCIPAL_MAPPING_RULES,
            }
        if self.protocol == "SSL":
            props["ssl.client.auth"] = "required"
        if self.uses_sasl:
            plain_users = " ".join(f'user_{u}="{password_of(u)}"' for u in (BROKER_USER, *self.users))
            login = f'username="{BROKER_USER}" password="{password_of(BROKER_USER)}"'
            plain = f"{PLAIN_LOGIN} required {login} {plain_users};"
            listener = p.lower()
            props |= {
                "sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "sasl.mechanism.controller.protocol": "PLAIN",
                f"listener.name.{listener}.plain.sasl.jaas.config": plain,
                "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
                "listener.name.controller.plain.sasl.jaas.config": plain,
            }
            for mechanism in SCRAM_MECHANISMS:
                key = f"listener.name.{listener}.{mechanism.lower()}.sasl.jaas.config"
                props[key] = f"{SCRAM_LOGIN} required;"
        return props

    def format_args(self) -> list[str]:
        """`kafka-storage format` arguments creating every user's SCRAM credentials (KIP-900)."""
        if not self.uses_sasl:
            return []
        args: list[str] = []
        for user in self.users:
            for mechanism in SCRAM_MECHANISMS:
                args += ["--add-scram", f"{mechanism}=[name={user},password={password_of(user)}]"]
        return args

    def client_properties(self, user: str, mechanism: str | None = None) -> dict[str, str]:
        """Kafka client properties for principal `user` (`--command-config`, Java clients)."""
        if user not in self.users and user != BROKER_USER:
            raise ValueError(f"no principal {user!r}; the cluster has {', '.join(self.users)}")
        props = {"security.protocol": self.protocol}
        if self.uses_tls:
            props |= {
                "ssl.truststore.type": "PKCS12",
                "ssl.truststore.location": str(self.ca.p12),
                "ssl.truststore.password": self.store_password,
            }
        if self.protocol == "SSL":
            props |= {
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": str(self.user_certs[user].p12),
                "ssl.keystore.password": self.store_password,
                "ssl.key.password": self.store_password,
            }
        if self.uses_sasl:
            mechanism = mechanism or self.mechanism
            props["sasl.mechanism"] = mechanism
            props["sasl.jaas.config"] = _jaas(PLAIN_LOGIN if mechanism == "PLAIN" else SCRAM_LOGIN, user)
        return props

    def write_client_properties(self, user: str, mechanism: str | None = None) -> Path:
        """`<user>.properties` (or `<user>-<mechanism>.properties` for another mechanism)."""
        suffix = f"-{mechanism.lower()}" if mechanism and mechanism != self.mechanism else ""
        path = self.directory / f"{user}{suffix}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.client_properties(user, mechanism).items()))
        return path

    def write_all_client_properties(self) -> dict[str, Path]:
        """A properties file per client principal, with the default mechanism."""
        return {user: self.write_client_properties(user) for user in self.users}

    def client_security(self, user: str = BROKER_USER) -> ClientSecurity:
        """How the harness itself connects (readiness checks) as `user`: PLAIN for SASL (enabled
        on the listener whatever the properties files name), the user's certificate for SSL."""
        context: ssl.SSLContext | None = None
        if self.uses_tls:
            context = ssl.create_default_context(cafile=str(self.ca.pem))
            # Every SSL user has a certificate; over SASL_SSL the broker's own is presented, so
            # a listener that also requires client certificates (ssl.client.auth) lets it in.
            if user in self.user_certs:
                cert = self.user_certs[user]
                context.load_cert_chain(str(cert.cert), str(cert.key))
        if self.uses_sasl:
            return ClientSecurity(self.protocol, context, "PLAIN", user, password_of(user))
        return ClientSecurity(self.protocol, context)

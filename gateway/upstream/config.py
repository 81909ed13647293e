"""Settings of the upstream connection (`upstream.*`): where the real Kafka cluster is, how
groupshift talks to it, and where the per-broker listeners go.

Names follow Kafka's client configs with an `upstream.` prefix (`upstream.bootstrap.servers`,
`upstream.request.timeout.ms`, `upstream.socket.connection.setup.timeout.ms`,
`upstream.metadata.max.age.ms`), so an operator reads them as the settings of the client that
groupshift is towards the cluster. Security is Kafka's client security under the same prefix
(`upstream.security.protocol` PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, `upstream.ssl.*`,
`upstream.sasl.*`, `upstream.sasl.login.*`: `SECURITY_SETTINGS`), read by
protocol.client_security exactly as `--command-config` files are, checked when the settings
are loaded (a missing truststore, a malformed JAAS entry or an unknown mechanism is a settings
error naming the key), and used by every upstream connection (gateway/upstream/security.py).

Per-broker listeners: upstream broker N is served on `upstream.node.port.base + N` (default
base: the main listener's port + 1; with `--listen HOST:0` every broker listener takes a free
port). A fixed arithmetic map, rather than a port range handed out in discovery order, gives a
broker the same local port across restarts and across several groupshift nodes in front of the
same cluster, so a client's cached metadata stays valid when a gateway restarts. Clients are
told `upstream.advertised.host` (default: the main listener's advertised host) with those ports,
as Kroxylicious' port-per-broker scheme does, so a NAT or container port mapping that keeps the
port numbers reaches every broker's listener.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from protocol.client_security import SECURITY_PROTOCOLS, ClientSecurity, ClientSecurityError

# Kafka client security settings read under `upstream.` (protocol.client_security,
# protocol.oauth_client); the field of each is its name with dots as underscores.
SECURITY_SETTINGS = (
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
    "ssl.truststore.certificates",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "ssl.enabled.protocols",
    "sasl.mechanism",
    "sasl.jaas.config",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.header.urlencode",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds",
    "sasl.login.connect.timeout.ms",
    "sasl.login.read.timeout.ms",
    "sasl.login.retry.backoff.ms",
    "sasl.login.retry.backoff.max.ms",
)
# Settings whose values are secrets: never shown (repr, logs, errors).
SECRET_SETTINGS = frozenset(
    {
        "ssl.truststore.password",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.key",
        "sasl.jaas.config",
    }
)


def parse_bootstrap(value: str) -> list[tuple[str, int]]:
    """`host:port[,host:port...]` as (host, port) pairs. A listener-style prefix naming a
    security protocol (`SASL_SSL://host:port`) is allowed and dropped: how to talk to the broker
    is `upstream.security.protocol`'s business."""
    out = []
    for part in value.split(","):
        text = part.strip()
        if not text:
            continue
        if "://" in text:
            scheme, _, text = text.partition("://")
            if scheme.upper() not in SECURITY_PROTOCOLS:
                raise ValueError(f"{scheme}:// is not a security protocol ({', '.join(SECURITY_PROTOCOLS)})")
        host, sep, port_text = text.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) <= 65535:
            raise ValueError(f"expected HOST:PORT, got {part!r}")
        out.append((host, int(port_text)))
    if not out:
        raise ValueError("at least one HOST:PORT is required")
    return out


class UpstreamConfig(BaseModel):
    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    bootstrap_servers: str = Field(alias="upstream.bootstrap.servers")
    request_timeout_ms: int = Field(30000, alias="upstream.request.timeout.ms", ge=100)
    connect_timeout_ms: int = Field(10000, alias="upstream.socket.connection.setup.timeout.ms", ge=100)
    # Kafka clients default to 5 minutes; a gateway wants broker and topic changes promptly
    # (the assignors' topic metadata comes from here).
    metadata_max_age_ms: int = Field(5000, alias="upstream.metadata.max.age.ms", ge=100)
    security_protocol: str = Field("PLAINTEXT", alias="upstream.security.protocol")
    # SECURITY_SETTINGS given (Kafka's names); secrets among them: never shown, never dumped
    security: dict[str, str] = Field(default_factory=dict, repr=False, exclude=True)
    node_port_base: int | None = Field(None, alias="upstream.node.port.base", ge=0, le=65535)
    # The host clients are told for every per-broker listener (default: the main listener's
    # advertised host); the ports stay base + node id, so a NAT or a Kubernetes Service maps them.
    advertised_host: str | None = Field(None, alias="upstream.advertised.host", min_length=1)
    offsets_import_enable: bool = Field(True, alias="upstream.offsets.import.enable")
    offsets_mirror_enable: bool = Field(True, alias="upstream.offsets.mirror.enable")
    # Scale-out (docs/scale-out.md): "kafka" keeps the coordinator shards on the upstream cluster
    # and shares them between the nodes of a fleet; "local" (default) is the single-node log.
    coordinator_storage: Literal["local", "kafka"] = Field("local", alias="upstream.coordinator.storage")
    coordinator_topic: str = Field(
        "groupshift-coordinator", alias="upstream.coordinator.topic", min_length=1, max_length=249
    )
    coordinator_replication_factor: int = Field(3, alias="upstream.coordinator.replication.factor", ge=1)
    fleet_group_id: str = Field("groupshift-fleet", alias="upstream.coordinator.fleet.group.id", min_length=1)
    fleet_session_timeout_ms: int = Field(
        10000, alias="upstream.coordinator.fleet.session.timeout.ms", ge=500
    )
    fleet_heartbeat_interval_ms: int = Field(
        1000, alias="upstream.coordinator.fleet.heartbeat.interval.ms", ge=50
    )
    # Whose principal the cluster sees (issue 29): `gateway`, groupshift's own, with every
    # forwarded request authorized by groupshift's ACLs (gateway.upstream.forwarded_acls);
    # `passthrough`, each client's own SASL exchange relayed to the cluster on the client's own
    # link, the group APIs authorized by probes of the cluster's ACLs
    # (gateway.upstream.passthrough).
    identity: str = Field("gateway", alias="upstream.identity")
    # passthrough: how long a probe's answer (allowed or not, per connection) is reused
    passthrough_acl_cache_ms: int = Field(
        30000, alias="upstream.identity.passthrough.acl.cache.ms", ge=0, le=3600000
    )
    # `gateway` identity: a JSON file mapping groupshift principals to upstream SASL credentials
    # (gateway.upstream.principal_credentials); principals not in it use groupshift's own
    # credential, or none at all when the map is required.
    identity_credentials_file: str | None = Field(
        None, alias="upstream.identity.credentials.file", min_length=1
    )
    identity_credentials_required: bool = Field(False, alias="upstream.identity.credentials.required")

    @field_validator("advertised_host")
    @classmethod
    def _routable(cls, value: str | None) -> str | None:
        if value is not None and value.strip() in ("0.0.0.0", "::"):
            raise ValueError(
                f"cannot use the nonroutable meta-address {value.strip()}. Use a routable IP address."
            )
        return value

    @field_validator("bootstrap_servers")
    @classmethod
    def _check_bootstrap(cls, value: str) -> str:
        parse_bootstrap(value)
        return value

    @model_validator(mode="before")
    @classmethod
    def _gather_security(cls, data: Any) -> Any:
        """`upstream.ssl.*` / `upstream.sasl.*` keys into `security` (Kafka's names, unprefixed)."""
        if not isinstance(data, dict):
            return data
        rest = dict(data)
        security = dict(rest.pop("security", None) or {})
        for name in SECURITY_SETTINGS:
            value = rest.pop(f"upstream.{name}", None)
            if value is not None:
                security[name] = str(value)
        return {**rest, "security": security}

    @field_validator("security_protocol")
    @classmethod
    def _check_security(cls, value: str) -> str:
        return value.strip().upper()

    @model_validator(mode="after")
    def _check_client_security(self) -> UpstreamConfig:
        """Read the security settings once now, so a missing store or a malformed JAAS entry
        stops the start with the key named, before anything connects."""
        self.client_security()
        self.principal_credentials()
        if self.identity == "passthrough":
            if not self.security_protocol.startswith("SASL_"):
                raise ValueError(
                    "upstream.identity=passthrough relays each client's SASL login to the cluster: "
                    "upstream.security.protocol must be SASL_PLAINTEXT or SASL_SSL, "
                    f"not {self.security_protocol}"
                )
            if self.identity_credentials_file is not None:
                raise ValueError(
                    "upstream.identity.credentials.file is for upstream.identity=gateway; with passthrough "
                    "each client logs in to the cluster itself"
                )
        return self

    def client_properties(self) -> dict[str, str]:
        """The security settings as Kafka client properties (no prefix)."""
        return {"security.protocol": self.security_protocol, **self.security}

    def client_security(self) -> ClientSecurity:
        """A new ClientSecurity from the settings (a fresh SSL context and token source).
        ValueError names the `upstream.` setting that is unusable."""
        try:
            return ClientSecurity.from_properties(self.client_properties(), prefix="upstream.")
        except ClientSecurityError as exc:
            raise ValueError(str(exc)) from None

    def principal_credentials(self) -> dict[str, ClientSecurity]:
        """`upstream.identity.credentials.file` read now (empty without one). ValueError names
        the setting and the principal, never a secret."""
        from gateway.upstream.principal_credentials import load_credentials

        if self.identity_credentials_file is None:
            if self.identity_credentials_required:
                raise ValueError(
                    "upstream.identity.credentials.required=true needs upstream.identity.credentials.file"
                )
            return {}
        return load_credentials(self.identity_credentials_file, self.client_properties())

    @field_validator("identity")
    @classmethod
    def _check_identity(cls, value: str) -> str:
        mode = value.strip().lower()
        if mode not in ("gateway", "passthrough"):
            raise ValueError(f"upstream.identity must be gateway or passthrough, got {value!r}")
        return mode

    @property
    def bootstrap(self) -> list[tuple[str, int]]:
        return parse_bootstrap(self.bootstrap_servers)


UPSTREAM_KEYS = {f.alias: name for name, f in UpstreamConfig.model_fields.items() if f.alias} | {
    f"upstream.{name}": "security" for name in SECURITY_SETTINGS
}

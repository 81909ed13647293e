"""Settings of the upstream connection (`upstream.*`): where the real Kafka cluster is, how
groupshift talks to it, and where the per-broker listeners go.

Names follow Kafka's client configs with an `upstream.` prefix (`upstream.bootstrap.servers`,
`upstream.request.timeout.ms`, `upstream.socket.connection.setup.timeout.ms`,
`upstream.metadata.max.age.ms`), so an operator reads them as the settings of the client that
groupshift is towards the cluster. Security (`upstream.security.protocol`) is reserved: only
PLAINTEXT is accepted for now, and anything else is refused at start-up rather than ignored.

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

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


def parse_bootstrap(value: str) -> list[tuple[str, int]]:
    """`host:port[,host:port...]` (Kafka's `PLAINTEXT://` prefix allowed) as (host, port) pairs."""
    out = []
    for part in value.split(","):
        text = part.strip()
        if not text:
            continue
        if "://" in text:
            scheme, _, text = text.partition("://")
            if scheme.upper() != "PLAINTEXT":
                raise ValueError(f"only PLAINTEXT upstream brokers are supported, got {part!r}")
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
    # `passthrough` (each client's own SASL exchange relayed) is not built yet.
    identity: str = Field("gateway", alias="upstream.identity")

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

    @field_validator("security_protocol")
    @classmethod
    def _check_security(cls, value: str) -> str:
        if value.upper() != "PLAINTEXT":
            raise ValueError(f"only PLAINTEXT is supported for now (SSL/SASL are reserved), got {value!r}")
        return value.upper()

    @field_validator("identity")
    @classmethod
    def _check_identity(cls, value: str) -> str:
        mode = value.strip().lower()
        if mode == "passthrough":
            raise ValueError(
                "upstream.identity=passthrough is not yet supported (only gateway: groupshift "
                "authenticates clients and authorizes them with its own ACLs)"
            )
        if mode != "gateway":
            raise ValueError(
                f"upstream.identity must be gateway (passthrough is not yet supported), got {value!r}"
            )
        return mode

    @property
    def bootstrap(self) -> list[tuple[str, int]]:
        return parse_bootstrap(self.bootstrap_servers)


UPSTREAM_KEYS = {f.alias: name for name, f in UpstreamConfig.model_fields.items() if f.alias}

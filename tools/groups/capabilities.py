"""Does the server in front of us serve the KIP-848 consumer group protocol? (KIP-848
"Consumer Group Protocol", its feature flag `group.version` of KIP-584 / KIP-1022.)

What a broker advertises is not enough, as measured on the releases:

- Kafka 3.7-3.9 list ConsumerGroupHeartbeat (API 68) v0 in ApiVersions whether or not
  `group.coordinator.rebalance.protocols` includes `consumer`; without it, the group APIs of
  KIP-848 answer UNSUPPORTED_VERSION (a consumer started with group.protocol=consumer then sits
  without partitions);
- Kafka 4.x lists it too when the `group.version` feature is 0 (`kafka-storage format --feature
  group.version=0`, or a downgraded feature): the finalized features of ApiVersions v3+ then
  carry no `group.version`, and the APIs answer UNSUPPORTED_VERSION as well;
- groupshift lists it only while the consumer protocol is enabled.

So the answer comes from three reads, all without writing anything: the ApiVersions list
(API 68 absent: classic only), a ConsumerGroupDescribe of a group id that does not exist
(UNSUPPORTED_VERSION: the protocol is off; GROUP_ID_NOT_FOUND or an empty group: it is served,
which is what `KafkaApis.isConsumerGroupProtocolEnabled` decides for both APIs), and the
finalized features (to name the cause: `group.version` 0 on a Kafka newer than 3.9, whose
`metadata.version` level is above 21 = 3.9-IV0).
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from typing import Any

from tools.groups.wire import AdminWire, KafkaError, WireError, code_of

CONSUMER_GROUP_HEARTBEAT = 68
UNSUPPORTED_VERSION = 35
METADATA_VERSION_3_9 = 21  # MetadataVersion.IBP_3_9_IV0.featureLevel(): 4.0 starts above it


@dataclass(frozen=True, slots=True)
class ServerCapabilities:
    """`serves_consumer_protocol`: True, False, or None when it could not be told; `reason`
    says how it was found; `bootstrap` is the address that was asked (used in the way out)."""

    serves_consumer_protocol: bool | None
    reason: str
    bootstrap: str = ""

    def ways_out(self) -> tuple[str, ...]:
        """The two ways to serve KIP-848 consumers when the server does not."""
        upstream = self.bootstrap or "HOST:PORT"
        return (
            "upgrade the brokers to Kafka 4.0+ with the group.version feature at 1 or more (or set "
            "group.coordinator.rebalance.protocols=classic,consumer on Kafka 3.7+)",
            f"put groupshift in front: groupshift serve --upstream {upstream} (then point the "
            "consumers at groupshift)",
        )

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ways_out"] = list(self.ways_out()) if self.serves_consumer_protocol is False else []
        return out


def probe_server(admin: AdminWire, bootstrap: str) -> ServerCapabilities:
    """Ask the endpoint (read-only requests) whether a group.protocol=consumer member is served."""
    try:
        versions = admin.api_versions()
    except (WireError, KafkaError) as e:
        return ServerCapabilities(None, f"ApiVersions failed: {e}", bootstrap)
    if CONSUMER_GROUP_HEARTBEAT not in versions:
        return ServerCapabilities(
            False,
            "the server does not list ConsumerGroupHeartbeat (API 68) in ApiVersions: it serves only "
            "the classic group protocol",
            bootstrap,
        )
    features = admin.features()
    finalized = features.finalized if features is not None else {}
    group_version = finalized.get("group.version", 0)
    metadata_version = finalized.get("metadata.version")
    probe = f"groupshift-check-probe-{uuid.uuid4().hex[:12]}"
    try:
        answer = admin.consumer_group_describe(probe)
    except (WireError, KafkaError) as e:
        return ServerCapabilities(
            None, f"ConsumerGroupHeartbeat is listed, but ConsumerGroupDescribe failed: {e}", bootstrap
        )
    if answer is None:
        return ServerCapabilities(
            None, "ConsumerGroupHeartbeat is listed, but ConsumerGroupDescribe is not", bootstrap
        )
    group, _v = answer
    code = code_of(group.error_code)
    hb = versions[CONSUMER_GROUP_HEARTBEAT]
    if code == UNSUPPORTED_VERSION:
        if metadata_version is not None and metadata_version > METADATA_VERSION_3_9:
            why = (
                f"the group.version feature is {group_version} (finalized features; Kafka 4.x serves "
                "the consumer protocol from group.version 1)"
            )
        else:
            why = (
                "group.coordinator.rebalance.protocols does not include consumer (Kafka 3.7-3.9 list "
                "the API all the same)"
            )
        return ServerCapabilities(
            False,
            f"ConsumerGroupHeartbeat v{hb[0]}-v{hb[1]} is listed but the KIP-848 group APIs answer "
            f"UNSUPPORTED_VERSION: {why}; a group.protocol=consumer member gets no partitions",
            bootstrap,
        )
    feature = f", group.version {group_version}" if "group.version" in finalized else ""
    return ServerCapabilities(True, f"ConsumerGroupHeartbeat v{hb[0]}-v{hb[1]} served{feature}", bootstrap)

"""A reference Apache Kafka you can start from Python (docs/kafka-in-the-loop.md).

`resolve(spec)` fetches a Kafka release's broker jars from Maven Central into the user's cache
once (`maven`), `KafkaCluster` runs a KRaft cluster of them on 127.0.0.1 (`cluster`), and
`java_clients(spec)` gives Kafka's own Java tools of any release (`java_clients`).
"""

from harness.kafka_dist.cluster import KafkaCluster, KafkaStartError, free_port
from harness.kafka_dist.maven import (
    KafkaDist,
    KafkaUnavailable,
    cache_root,
    cached_dists,
    cached_versions,
    resolve,
    resolve_component,
    tools_missing,
)

__all__ = [
    "KafkaCluster",
    "KafkaDist",
    "KafkaStartError",
    "KafkaUnavailable",
    "cache_root",
    "cached_dists",
    "cached_versions",
    "free_port",
    "resolve",
    "resolve_component",
    "tools_missing",
]

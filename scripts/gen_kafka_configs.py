"""Regenerate `gateway/dataplane/kafka_configs.json` from a running Apache Kafka node.

The embedded data plane describes topic and broker configs as a Kafka node does (names, types,
defaults, documentation, which broker configs are dynamic). Those facts belong to Kafka's
`LogConfig`, `ServerLogConfigs` and `KafkaConfig` definitions, and the simplest faithful way to
collect them is to ask a fresh Kafka node: create a topic with no overrides and run
DescribeConfigs (v4, with synonyms and documentation) on it and on the broker.

    python -m scripts.gen_kafka_configs --bootstrap 127.0.0.1:9092 --version 4.3.1

The node must be fresh (no dynamic broker configs set); the order of the entries is the order
Kafka lists them in, which the data plane keeps so that answers compare line by line.
"""

from __future__ import annotations

import argparse
import json
import uuid
from pathlib import Path
from typing import Any

from protocol.client import WireClient, make_request

OUT = Path(__file__).resolve().parent.parent / "gateway" / "dataplane" / "kafka_configs.json"
TOPIC, BROKER, DEFAULT_CONFIG = 2, 4, 5


def _default_of(entry: Any) -> str | None:
    """Kafka's own default: the DEFAULT_CONFIG synonym of the name itself, if any."""
    if entry.config_source == DEFAULT_CONFIG:
        return entry.value  # type: ignore[no-any-return]
    for s in entry.synonyms:
        if s.name == entry.name and s.source == DEFAULT_CONFIG:
            return s.value  # type: ignore[no-any-return]
    return None


def collect(bootstrap: str, version: str) -> dict[str, Any]:
    host, _, port = bootstrap.rpartition(":")
    topic = f"gen-{uuid.uuid4().hex[:8]}"
    with WireClient(int(port), host=host, timeout=30) as c:
        created = c.request(
            make_request(
                19,
                7,
                topics=[
                    {
                        "name": topic,
                        "num_partitions": 1,
                        "replication_factor": -1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                timeout=30000,
                validate_only=False,
            )
        )
        assert created.topics[0].error_code.value == 0, created
        node = (
            c.request(
                make_request(
                    3,
                    12,
                    topics=[],
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
            )
            .brokers[0]
            .node_id
        )
        described = c.request(
            make_request(
                32,
                4,
                resources=[
                    {"resource_type": TOPIC, "resource_name": topic, "configuration_keys": None},
                    {"resource_type": BROKER, "resource_name": str(node), "configuration_keys": None},
                ],
                include_synonyms=True,
                include_documentation=True,
            )
        )
        c.request(make_request(20, 6, topics=[{"name": topic, "topic_id": None}], timeout=30000))
    topic_res, broker_res = described.results
    return {
        "kafka_version": version,
        "topic": [
            {"name": e.name, "type": e.config_type, "default": e.value, "documentation": e.documentation}
            for e in topic_res.configs
        ],
        "broker": [
            {
                "name": e.name,
                "type": e.config_type,
                "default": _default_of(e),
                "dynamic": not e.read_only,
                "sensitive": e.is_sensitive,
                "documentation": e.documentation,
            }
            for e in broker_res.configs
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--version", required=True, help="the Kafka release the node runs")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    doc = collect(args.bootstrap, args.version)
    args.out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(doc['topic'])} topic configs, {len(doc['broker'])} broker configs")


if __name__ == "__main__":
    main()

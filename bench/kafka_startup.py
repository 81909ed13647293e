"""Cost of the reference Kafka (harness.kafka_dist): a cached resolve, the start of a one-node
and a three-node KRaft cluster (format + JVM start until ApiVersions and Metadata answer), a
killed node's restart, and a clean stop. These set how long tests that use a real Kafka wait.

    python -m bench.kafka_startup [--json] [--versions 4,3.9,3.7] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from harness.kafka_dist import KafkaCluster, resolve


def _timed_cluster(version: str, brokers: int) -> dict[str, float]:
    cluster = KafkaCluster(version, brokers=brokers)
    try:
        cluster.start()
        figures = {"start_s": cluster.startup_seconds or 0.0}
        if brokers > 1:
            cluster.kill_broker(brokers - 1)
            began = time.monotonic()
            cluster.start_broker(brokers - 1)
            figures["restart_killed_s"] = time.monotonic() - began
        began = time.monotonic()
        cluster.stop()
        figures["stop_s"] = time.monotonic() - began
        return figures
    finally:
        cluster.stop()
        cluster.cleanup()


def measure(versions: list[str], rounds: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for spec in versions:
        began = time.monotonic()
        dist = resolve(spec)
        cached_resolve = time.monotonic() - began
        for brokers in (1, 3) if spec == versions[0] else (1,):
            runs = [_timed_cluster(spec, brokers) for _ in range(rounds)]
            row: dict[str, Any] = {
                "spec": spec,
                "version": dist.version,
                "brokers": brokers,
                "resolve_s": round(cached_resolve, 3),
                "download_s": dist.info.get("seconds"),
                "jars_mb": round(float(str(dist.info.get("bytes", 0))) / 1e6, 1),
            }
            for key in runs[0]:
                row[key] = round(statistics.median(r[key] for r in runs), 2)
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--versions", default="4,3.9,3.7")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    rows = measure(args.versions.split(","), args.rounds)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    for row in rows:
        extra = f", killed node back in {row['restart_killed_s']}s" if "restart_killed_s" in row else ""
        print(
            f"Kafka {row['version']} ({row['spec']}) x{row['brokers']}: start {row['start_s']}s, "
            f"stop {row['stop_s']}s{extra}; cached resolve {row['resolve_s']}s, "
            f"jars {row['jars_mb']} MB (fetched in {row['download_s']}s)"
        )


if __name__ == "__main__":
    main()

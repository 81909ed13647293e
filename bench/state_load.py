"""Loading a coordinator's state: groupshift and Apache Kafka on the same log, in one run.

Both load the same `__consumer_offsets` partition: bench.log builds a coordinator log of
`--records` real records (offset commits of thousands of groups, and KIP-848 consumer groups'
records) in groupshift's data dir; `records export` writes it, batch for batch, into the log dir
of a stopped single-node Kafka (`offsets.topic.num.partitions=1`, the JVM flags of Kafka's start
scripts), which is then restarted and loads it.

* groupshift: `CoordinatorStorage.open` timed (log recovery, decode, replay, the load duties),
  as `python -m bench.log --only load` does.
* Kafka: what the broker itself logs for the partition: the log's load (LogManager's "Completed
  load of Log(dir=.../__consumer_offsets-0, ...) ... in Nms": the segment opened, its missing
  index rebuilt) plus
  the group coordinator's ("Finished loading of metadata from __consumer_offsets-0 ... in N ms":
  every record replayed into its state machines). The JVM's own start-up is not counted, but its
  JIT is cold, as after a broker restart; a coordinator moving to a broker that has run for a
  while would load faster. groupshift's process is warm (it built the log just before).

The two alternate `--runs` times (groupshift first, then Kafka, each run on a fresh copy of the
log for Kafka); the medians and the ratio are printed.

    python -m bench.state_load [--records N] [--runs N] [--kafka VERSION] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.kafka_reference import KAFKA_SERVER_JVM_OPTS
from bench.log import bench_load, build_coordinator_log

LOG_LOADED = re.compile(r"Completed load of Log\(dir=\S*__consumer_offsets-0,.*? in (\d+) ?ms")
COORDINATOR_LOADED = re.compile(
    r"Finished loading of metadata from __consumer_offsets-0 with epoch \d+ in (\d+)ms"
    r"(?: where (\d+)ms was spent in the scheduler)?.*?Loaded (\d+) records"
)


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _kafka_loaded(log: Path, since: int, timeout: float) -> tuple[int, int, int]:
    """(log load ms, coordinator load ms, records) from the broker's log after offset `since`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with log.open("rb") as f:
            f.seek(since)
            text = f.read().decode("utf-8", "replace")
        coordinator = COORDINATOR_LOADED.search(text)
        if coordinator:
            log_load = LOG_LOADED.search(text)
            return (
                int(log_load.group(1)) if log_load else 0,
                int(coordinator.group(1)),
                int(coordinator.group(3)),
            )
        time.sleep(0.5)
    raise TimeoutError(f"Kafka did not log the load of __consumer_offsets-0 within {timeout:.0f}s")


def run(records: int, runs: int, version: str, workdir: Path) -> dict[str, Any]:
    from harness.kafka_dist import KafkaCluster
    from tools.groups.wire import AdminWire
    from tools.records_transfer import export_data_dir

    os.environ.setdefault("GROUPSHIFT_KAFKA_JVM_OPTS", KAFKA_SERVER_JVM_OPTS)
    data = workdir / "groupshift"
    shard = data / "coordinator" / "__consumer_offsets-0"
    shard.parent.mkdir(parents=True)
    built = build_coordinator_log(str(shard), records)
    pristine = workdir / "pristine"
    shutil.copytree(shard, pristine)

    configs = {"offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "1"}
    groupshift: list[dict[str, Any]] = []
    kafka: list[dict[str, Any]] = []
    with KafkaCluster(version, configs=configs, workdir=workdir / "kafka") as cluster:
        cluster.start()
        with AdminWire(cluster.bootstrap, timeout=60) as wire:
            wire.coordinator("bench")  # creates __consumer_offsets
        cluster.stop_broker(0)
        log_dir = cluster.nodes[0].data_dir
        if not (log_dir / "__consumer_offsets-0").is_dir():
            raise RuntimeError(f"Kafka wrote no __consumer_offsets-0 under {log_dir}")
        for _ in range(runs):
            shutil.rmtree(shard)
            shutil.copytree(pristine, shard)
            groupshift.append(bench_load(str(shard)))
            shutil.rmtree(shard)
            shutil.copytree(pristine, shard)
            with open(os.devnull, "w") as quiet:
                export_data_dir(data, log_dir, 1, None, quiet, force=True, backup_dir=workdir / "backup")
            shutil.rmtree(workdir / "backup", ignore_errors=True)
            since = cluster.log_path(0).stat().st_size
            cluster.start_broker(0)
            log_ms, coordinator_ms, loaded = _kafka_loaded(cluster.log_path(0), since, timeout=600)
            kafka.append({"log_load_ms": log_ms, "coordinator_load_ms": coordinator_ms, "records": loaded})
            cluster.stop_broker(0)
    ours = statistics.median(r["total_s"] for r in groupshift) * 1000
    theirs = statistics.median(k["log_load_ms"] + k["coordinator_load_ms"] for k in kafka)
    return {
        "records": built["records"],
        "bytes": built["bytes"],
        "kafka": version,
        "groupshift_runs": groupshift,
        "kafka_runs": kafka,
        "groupshift_ms": round(ours),
        "kafka_ms": round(theirs),
        "ratio": round(ours / theirs, 2) if theirs else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.state_load", description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kafka", default="4.4.0", metavar="VERSION")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.records < 1000 or args.runs < 1:
        parser.error("--records must be at least 1000 and --runs at least 1")
    before = load_average()
    with tempfile.TemporaryDirectory(prefix="groupshift-state-load-") as tmp:
        try:
            result = run(args.records, args.runs, args.kafka, Path(tmp))
        except (RuntimeError, TimeoutError, OSError) as exc:
            print(f"bench.state_load: {exc}", file=sys.stderr)
            return 2
    result["load_average"] = {"before": before, "after": load_average()}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{result['records']:,} records, {result['bytes'] / 1e6:.1f} MB; load average {before}")
    for i, (g, k) in enumerate(zip(result["groupshift_runs"], result["kafka_runs"], strict=True)):
        print(
            f"run {i + 1}: groupshift {g['total_s'] * 1000:.0f} ms (cpu {g['total_cpu_s'] * 1000:.0f}); "
            f"Kafka {k['log_load_ms'] + k['coordinator_load_ms']} ms "
            f"(log {k['log_load_ms']}, coordinator {k['coordinator_load_ms']}, {k['records']:,} records)"
        )
    print(
        f"median: groupshift {result['groupshift_ms']} ms, Kafka {result['kafka']} {result['kafka_ms']} ms, "
        f"ratio {result['ratio']}; load average after {result['load_average']['after']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

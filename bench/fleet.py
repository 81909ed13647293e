"""Benchmark of `groupshift fleet report`'s Spark job on local[2]: wall time, records/s and peak
memory (driver JVM, Python workers, driver Python) at 1M, 10M and 30M coordinator records.

Goal: 10M records in at most 3 minutes on a 2-core machine, time growing linearly with records.

The records come from the real engine: a base fleet is synthesized once (`groupshift fleet
synth`, cached in `--workdir`) and the larger inputs are that fleet's segment files repeated
under other cluster names (symbolic links; Spark reads each as a file of its own), so every size
decodes, compacts and judges records the engine wrote. Each size runs the whole job (segments,
compaction, facts and verdicts, health, Parquet) in a fresh SparkSession.

    python -m bench.fleet [--sizes 1M,10M,30M] [--workdir DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

BASE_RECORDS = 1_000_000


def _parse_size(text: str) -> int:
    t = text.strip().upper()
    mult = {"K": 1_000, "M": 1_000_000}.get(t[-1:], 1)
    return int(float(t[:-1] if t[-1:] in "KM" else t) * mult)


def _base(workdir: Path) -> Path:
    base = workdir / "base"
    done = base / ".done"
    if done.exists():
        return base
    from tools.fleet.command import _quiet_engine_logs
    from tools.fleet.synth import synth

    _quiet_engine_logs()
    shutil.rmtree(base, ignore_errors=True)
    t = time.monotonic()
    res = synth(str(base), clusters=4, groups=100, records=BASE_RECORDS, hours=2.0, seed=1)
    done.write_text(json.dumps({"records": res.records, "seconds": time.monotonic() - t}))
    return base


def _base_records(base: Path) -> int:
    return int(json.loads((base / ".done").read_text())["records"])


def _replicas(workdir: Path, base: Path, copies: int) -> list[str]:
    """`copies` clusters, each the base fleet's clusters under new names (links to its files)."""
    inputs = []
    for i in range(copies):
        for cluster in sorted(p for p in base.iterdir() if p.is_dir()):
            name = f"r{i:02d}-{cluster.name}"
            if i == 0:
                inputs.append(f"{name}={cluster}")
                continue
            target = workdir / "replicas" / name
            if not target.exists():
                for src in cluster.rglob("*"):
                    dst = target / src.relative_to(cluster)
                    if src.is_dir():
                        dst.mkdir(parents=True, exist_ok=True)
                    else:
                        dst.parent.mkdir(parents=True, exist_ok=True)
                        dst.symlink_to(src)
            inputs.append(f"{name}={target}")
    return inputs


class _Peak(threading.Thread):
    """Samples the RSS of this process's descendants: the driver JVM (which is also the executor
    in local mode) and the Python workers it forks."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.jvm = 0
        self.workers = 0
        self.driver = 0

    @staticmethod
    def _children() -> dict[int, list[int]]:
        tree: dict[int, list[int]] = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            tree.setdefault(ppid, []).append(int(pid))
        return tree

    @staticmethod
    def _rss(pid: int) -> tuple[int, str]:
        try:
            with open(f"/proc/{pid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")[0].decode(errors="replace")
            return int(fields["VmRSS"].split()[0]) * 1024, cmd
        except (OSError, KeyError, ValueError):
            return 0, ""

    def sample(self) -> None:
        tree = self._children()
        stack = list(tree.get(os.getpid(), []))
        jvm = workers = 0
        while stack:
            pid = stack.pop()
            stack += tree.get(pid, [])
            rss, cmd = self._rss(pid)
            if os.path.basename(cmd) == "java":
                jvm += rss
            elif "python" in os.path.basename(cmd):
                workers += rss
        self.jvm = max(self.jvm, jvm)
        self.workers = max(self.workers, workers)
        self.driver = max(self.driver, self._rss(os.getpid())[0])

    def run(self) -> None:
        while not self.stop.wait(0.5):
            self.sample()


def measure(inputs: list[str], records: int, out: Path) -> dict[str, Any]:
    from tools.fleet.inputs import discover
    from tools.fleet.job import run, session

    clusters = discover(inputs)
    peak = _Peak()
    peak.start()
    t0 = time.monotonic()
    spark = session("local[2]", app="bench-fleet", **{"spark.driver.memory": "2g"})
    spark.sparkContext.setLogLevel("ERROR")
    started = time.monotonic() - t0
    try:
        result = run(spark, clusters, str(out), ["classic-protocol"])
    finally:
        spark.stop()
        peak.stop.set()
        peak.join()
    wall = result.seconds
    return {
        "records": records,
        "segment_files": sum(len(c.segments) for c in clusters),
        "groups": result.counts.get("facts", 0),
        "session_start_s": round(started, 1),
        "job_s": round(wall, 1),
        "records_per_s": round(records / wall),
        "peak_driver_jvm_mb": round(peak.jvm / 2**20),
        "peak_python_workers_mb": round(peak.workers / 2**20),
        "peak_driver_python_mb": round(peak.driver / 2**20),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1M,10M,30M", help="record counts (default 1M,10M,30M)")
    parser.add_argument("--workdir", default="/tmp/groupshift-bench-fleet", help="cache of the base fleet")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    base = _base(workdir)
    per_copy = _base_records(base)
    results = []
    for size in (_parse_size(s) for s in args.sizes.split(",")):
        copies = max(1, round(size / per_copy))
        inputs = _replicas(workdir, base, copies)
        out = workdir / f"out-{size}"
        shutil.rmtree(out, ignore_errors=True)
        r = measure(inputs, copies * per_copy, out)
        shutil.rmtree(out, ignore_errors=True)
        results.append(r)
        if not args.json:
            print(
                f"{r['records']:>12,} records  {r['job_s']:>7.1f} s  {r['records_per_s']:>9,} rec/s  "
                f"JVM {r['peak_driver_jvm_mb']:,} MB  workers {r['peak_python_workers_mb']:,} MB  "
                f"driver {r['peak_driver_python_mb']:,} MB  ({r['groups']:,} groups)",
                flush=True,
            )
    if args.json:
        json.dump({"machine_cpus": os.cpu_count(), "results": results}, sys.stdout, indent=2)
        print()


if __name__ == "__main__":
    main()

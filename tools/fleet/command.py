"""Arguments of `groupshift fleet report` and `groupshift fleet synth` (issue 16).

    groupshift fleet report [NAME=]PATH... --out DIR [--master URL] [--downgrade-target T]...
    groupshift fleet synth --clusters C --groups N --records R --out DIR [--hours H] [--seed S]

`report` runs the Spark job (tools.fleet.job) on `--master` (`local[2]` by default; any Spark
master URL, e.g. `spark://host:7077`) and writes the Parquet tables and `report.html` under DIR;
`--reference` computes the same tables in plain Python instead (small fleets, no Java). Exit
status: 0 done, 1 the job failed, 2 bad arguments or unreadable inputs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any

from tools.check.rules import CLASSIC_TARGET


def add_parser(sub: Any, summary: str) -> argparse.ArgumentParser:
    """The `fleet` parser; `summary` is its line in `groupshift --help` (groupshift.cli.COMMANDS)."""
    p: argparse.ArgumentParser = sub.add_parser(
        "fleet",
        help=summary,
        description=(
            "Read the coordinator logs and event logs of a whole fleet on Spark: which groups can "
            "migrate now, which block and why, which are unsafe to roll back, and how their "
            "rebalances behave before, during and after a migration."
        ),
    )
    fs = p.add_subparsers(dest="fleet_command", metavar="SUBCOMMAND")

    r = fs.add_parser("report", help="Parquet tables and report.html for the inputs")
    r.add_argument(
        "inputs",
        nargs="+",
        metavar="NAME=PATH",
        help="a groupshift data dir, a Kafka log dir or __consumer_offsets-N dir, or an event log, "
        "tagged with its cluster name (a bare PATH is named after its directory; a directory of "
        "cluster directories, as `fleet synth --out` writes, gives one cluster each)",
    )
    r.add_argument("--out", required=True, metavar="DIR", help="where the tables and report.html go")
    r.add_argument("--master", default="local[2]", metavar="URL", help="Spark master (default local[2])")
    r.add_argument(
        "--downgrade-target",
        action="append",
        metavar="T",
        help=f"downgrade checks to run (repeatable; default {CLASSIC_TARGET}; kafka-3.9, ...)",
    )
    r.add_argument("--reference", action="store_true", help="plain Python instead of Spark (small fleets)")
    r.set_defaults(run=_run_report)

    s = fs.add_parser("synth", help="generate a fleet of groupshift data dirs by driving the real engine")
    s.add_argument("--clusters", type=int, required=True, metavar="C", help="clusters to generate (>= 1)")
    s.add_argument("--groups", type=int, required=True, metavar="N", help="groups per cluster")
    s.add_argument("--records", type=int, required=True, metavar="R", help="records, all clusters together")
    s.add_argument("--out", required=True, metavar="DIR", help="where the cluster data dirs go")
    s.add_argument("--hours", type=float, default=4.0, help="simulated time per cluster (default 4)")
    s.add_argument("--seed", type=int, default=1, help="seed of the generated fleet (default 1)")
    s.set_defaults(run=_run_synth)

    def usage(args: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(run=usage)
    return p


def _quiet_engine_logs() -> None:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def _run_synth(args: argparse.Namespace) -> int:
    from tools.fleet.synth import synth

    if args.clusters < 1 or args.groups < 1 or args.records < 0:
        print("groupshift fleet synth: error: --clusters and --groups must be >= 1", file=sys.stderr)
        return 2
    if not args.hours > 0:
        print("groupshift fleet synth: error: --hours must be more than 0", file=sys.stderr)
        return 2
    _quiet_engine_logs()
    res = synth(
        args.out,
        clusters=args.clusters,
        groups=args.groups,
        records=args.records,
        hours=args.hours,
        seed=args.seed,
        progress=sys.stdout,
    )
    print(f"{len(res.clusters)} clusters, {res.groups} groups, {res.records} records under {args.out}")
    print(f"next: groupshift fleet report {args.out} --out REPORT_DIR")
    return 0


def _first_line(e: BaseException) -> str:
    """The first non-empty line of a JVM or worker exception (Py4J puts the Java stack trace
    after it), cut to 300 characters."""
    return next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)[:300]


def _run_report(args: argparse.Namespace) -> int:
    from tools.check.loader_rules import KAFKA_TARGETS
    from tools.fleet.inputs import InputError, discover

    targets = args.downgrade_target or [CLASSIC_TARGET]
    unknown = [t for t in targets if t != CLASSIC_TARGET and t not in KAFKA_TARGETS]
    if unknown:  # said before any input is read or Spark is started
        known = ", ".join([CLASSIC_TARGET, *KAFKA_TARGETS])
        print(f"groupshift fleet report: error: unknown --downgrade-target {unknown[0]!r}; known: {known}",
              file=sys.stderr)  # fmt: skip
        return 2
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        print(f"groupshift fleet report: error: --out {args.out} is not a directory", file=sys.stderr)
        return 2
    try:
        clusters = discover(args.inputs)
    except InputError as e:
        print(f"groupshift fleet report: error: {e}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    if args.reference:
        from tools.fleet.reference import write_reference

        data = write_reference(clusters, args.out, targets)
    else:
        from tools.fleet.job import run, session
        from tools.fleet.report import from_tables

        spark_log = os.path.join(os.path.abspath(args.out), "spark.log")
        try:
            spark = session(args.master, log_path=spark_log)
        except Exception as e:  # a bad --master, no Java: one line, Spark's log has the rest
            print(f"groupshift fleet report: error: Spark did not start: {_first_line(e)} "
                  f"(Spark's log: {spark_log})", file=sys.stderr)  # fmt: skip
            return 2
        try:
            result = run(spark, clusters, args.out, targets)
            tables = {n: spark.read.parquet(os.path.join(args.out, n)) for n in result.counts}
            data = from_tables(tables)
        except Exception as e:  # a JVM or worker failure: one line, the log has the rest
            print(f"groupshift fleet report: error: the Spark job failed: {_first_line(e)} "
                  f"(Spark's log: {spark_log})", file=sys.stderr)  # fmt: skip
            return 1
        finally:
            with contextlib.suppress(Exception):
                spark.stop()
        counts = ", ".join(f"{n} {c}" for n, c in result.counts.items())
        print(f"tables ({counts}) in {result.seconds:.1f}s")
    from tools.fleet.report import render

    path = os.path.join(args.out, "report.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(render(data))
    print(f"report: {path}")
    return 0

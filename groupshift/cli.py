"""The `groupshift` command. Subcommands import their layer lazily so `--version` stays instant."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from groupshift import __version__

Runner = Callable[[argparse.Namespace], int]


def _add_simulate(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "simulate",
        help="run a scripted or random consumer-group scenario through the engine",
        description=(
            "Drive the sans-IO engine with a virtual clock and print, after each step, the group "
            "epoch, the target assignment and every member's epoch, state and partitions "
            "(the KIP-848 case studies' format)."
        ),
    )
    p.add_argument(
        "--scenario",
        default="basic",
        help="basic | incremental | member-failure | partition-added | random (default: basic)",
    )
    p.add_argument("--seed", type=int, default=1, help="seed for --scenario random")
    p.add_argument("--steps", type=int, default=30, help="steps for --scenario random")
    p.add_argument("--assignor", default="uniform", help="server assignor (uniform | range)")
    p.add_argument(
        "--chaos",
        action="store_true",
        help="run the deterministic whole-coordinator simulator with faults instead "
        "(docs/simulation.md; needs a source checkout with the test extras)",
    )
    p.add_argument("--seeds", type=int, default=1, help="--chaos: seeds --seed .. --seed+N-1")
    p.add_argument("--keep-going", action="store_true", help="--chaos: run every seed after a violation")
    p.add_argument(
        "--tolerate-known",
        action="store_true",
        help="--chaos: restore the expiry timer lost with a failed append (issue 11) and go on",
    )

    def run(args: argparse.Namespace) -> int:
        if args.chaos:
            return _run_chaos(args)
        from engine.simulate import main as simulate_main

        return simulate_main(
            args.scenario, seed=args.seed, steps=args.steps, assignor=args.assignor, out=sys.stdout
        )

    p.set_defaults(run=run)


def _run_chaos(args: argparse.Namespace) -> int:
    import importlib

    try:
        # imported by name: the simulator lives in tests/ (it reuses the test suite's clients)
        chaos = importlib.import_module("tests.chaos")
    except ImportError as e:
        print(
            f"groupshift simulate --chaos runs tests/chaos.py from a source checkout with the test "
            f"extras installed (run it from the repository root): {e}",
            file=sys.stderr,
        )
        return 2
    result: int = chaos.main(
        args.seed,
        args.steps,
        args.seeds,
        sys.stdout,
        keep_going=args.keep_going,
        tolerate_known=args.tolerate_known,
    )
    return result


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve",
        help="run the Kafka-protocol gateway: consumer groups of both protocols, embedded topics",
        description=(
            "Serve the Kafka wire protocol on one listener. Settings use Kafka's broker config "
            "names; a properties file (--config), the flags below and --set NAME=VALUE feed "
            "the same validated model (later sources win: file, flags, --set)."
        ),
    )
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="listener (`listeners`, default 127.0.0.1:9092; port 0 picks a free port)",
    )
    p.add_argument("--data-dir", metavar="DIR", help="data directory (`log.dirs`, default ./groupshift-data)")
    p.add_argument("--config", metavar="FILE", help="Java-properties file of NAME=VALUE lines")
    p.add_argument(
        "--set",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="one setting by its Kafka name, e.g. --set num.partitions=6 (repeatable)",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])

    def run(args: argparse.Namespace) -> int:
        from gateway.config import ConfigError, load_config
        from gateway.groups.service import install_group_layer
        from gateway.logs import configure_logging
        from gateway.server import run as serve

        configure_logging(args.log_level)
        overrides = {}
        if args.listen is not None:
            overrides["listeners"] = args.listen
        if args.data_dir is not None:
            overrides["log.dirs"] = args.data_dir
        try:
            config = load_config(config_file=args.config, overrides=overrides, sets=args.set)
        except ConfigError as e:
            p.error(str(e))
        return serve(config, extensions=[install_group_layer])

    p.set_defaults(run=run)


_RECORDS_DUMP_EPILOG = """\
PATH is one of:
  a log directory     every <20-digit offset>.log segment in it: groupshift's
                      <data dir>/coordinator/__consumer_offsets-N, or a __consumer_offsets-N
                      directory copied from a Kafka broker (.index, .timeindex, ... ignored)
  a .log file         one segment
  any other file      raw records as text, one per line:
                        <key hex> <value hex, or - for a tombstone>
                      blank lines and lines starting with # are ignored; records are numbered
                      from 0 (shown as the offset). E.g. from a live cluster with kafka-python:
                        for m in KafkaConsumer("__consumer_offsets", exclude_internal_topics=False,
                                auto_offset_reset="earliest", consumer_timeout_ms=5000):
                            print(m.key.hex(), "-" if m.value is None else m.value.hex())

One line per record: offset, timestamp, record type, key fields, value version and fields (or
<tombstone>), with Kafka's JSON field names. Unknown record types are printed as unknown(N).
Malformed records, compressed batches (unsupported) and damaged batches are reported on an
"error:" line naming the offset (or file and byte position) and the dump continues. The input
is only read (no recovery, no lock). Exit status: 0 all decoded, 1 errors were reported, 2 PATH
cannot be read.
"""


def _add_records(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "records",
        help="inspect __consumer_offsets records (groupshift's logs or a Kafka broker's)",
        description="Tools for coordinator records: the __consumer_offsets key/value format.",
    )
    records_sub = p.add_subparsers(dest="records_command", metavar="COMMAND")
    d = records_sub.add_parser(
        "dump",
        help="print every record of a log directory, segment or raw-pairs file, decoded",
        description=(
            "Print the coordinator records of PATH decoded, like Kafka's `kafka-dump-log --offsets-decoder`."
        ),
        epilog=_RECORDS_DUMP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument("path", metavar="PATH", help="log directory, .log segment or raw-pairs text file")
    d.add_argument("--json", action="store_true", help="print one JSON object per record")

    def run_dump(args: argparse.Namespace) -> int:
        from records.dump import dump

        try:
            return dump(args.path, as_json=args.json)
        except BrokenPipeError:  # e.g. piped into `head`: stop quietly
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 0

    def usage(args: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(run=usage)
    d.set_defaults(run=run_dump)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="groupshift", description=__doc__)
    parser.add_argument("--version", action="version", version=f"groupshift {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_simulate(sub)
    _add_serve(sub)
    _add_records(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Runner | None = getattr(args, "run", None)
    if run is None:
        parser.print_help()
        return 2
    return run(args)

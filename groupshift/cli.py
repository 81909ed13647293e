"""The `groupshift` command.

Subcommands import their layer lazily so `--version` stays instant. Errors in settings are
printed as `groupshift serve: error: ...` alone (no usage block: the usage is not the problem),
and output piped into a reader that stops early (`| head`) ends the command quietly.
"""

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
            "(the KIP-848 case studies' format). Migration scenarios mix classic members "
            "(JoinGroup/SyncGroup, eager range) and KIP-848 members in one group."
        ),
    )
    p.add_argument(
        "--scenario",
        default="basic",
        help=(
            "basic | incremental | member-failure | partition-added | random (default: basic), or a "
            "migration: online-migration (the KIP's case study) | rolling-upgrade | rolling-downgrade"
        ),
    )
    p.add_argument("--seed", type=int, default=1, help="seed for --scenario random")
    p.add_argument("--steps", type=int, default=30, help="steps for --scenario random")
    p.add_argument("--assignor", default="uniform", help="server assignor (uniform | range)")
    p.add_argument(
        "--chaos",
        action="store_true",
        help="run the deterministic whole-coordinator simulator with faults instead (docs/simulation.md)",
    )
    p.add_argument("--seeds", type=int, default=1, help="--chaos: seeds --seed .. --seed+N-1")
    p.add_argument("--keep-going", action="store_true", help="--chaos: run every seed after a violation")

    def run(args: argparse.Namespace) -> int:
        if args.chaos:
            from sim.chaos import main as chaos_main

            return chaos_main(args.seed, args.steps, args.seeds, sys.stdout, keep_going=args.keep_going)
        from sim.migration_scenarios import SCENARIOS as MIGRATIONS
        from sim.migration_scenarios import main as migration_main
        from sim.scenarios import main as simulate_main

        if args.scenario in MIGRATIONS:
            return migration_main(args.scenario, assignor=args.assignor, out=sys.stdout)
        return simulate_main(
            args.scenario, seed=args.seed, steps=args.steps, assignor=args.assignor, out=sys.stdout
        )

    p.set_defaults(run=run)


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
        "--upstream",
        metavar="BOOTSTRAP",
        help=(
            "front an existing Kafka cluster (`upstream.bootstrap.servers`, HOST:PORT[,HOST:PORT...]): "
            "group APIs are answered here, everything else is forwarded"
        ),
    )
    p.add_argument(
        "--set",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="one setting by its Kafka name, e.g. --set num.partitions=6 (repeatable)",
    )
    p.add_argument(
        "--force-data-dir",
        action="store_true",
        help="use a non-empty data directory that groupshift did not create (normally refused)",
    )
    p.add_argument(
        "--ignore-topics-file",
        action="store_true",
        help=(
            "start although topics.json is missing or damaged (normally refused): with no topics, "
            "the damaged file kept as topics.json.<id>-damaged and every partition directory "
            "renamed aside as <name>.<id>-stray; nothing is deleted"
        ),
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])

    def run(args: argparse.Namespace) -> int:
        import structlog

        from gateway.config import ConfigError, check_data_dir, check_data_dir_is_ours, load_settings
        from gateway.dataplane.datadir import DataDirLock, DataDirLockedError
        from gateway.groups.service import install_group_layer
        from gateway.logs import configure_logging
        from gateway.server import Extension
        from gateway.server import run as serve

        configure_logging(args.log_level)
        overrides = {}
        if args.listen is not None:
            overrides["listeners"] = args.listen
        if args.data_dir is not None:
            overrides["log.dirs"] = args.data_dir
        if args.upstream is not None:
            overrides["upstream.bootstrap.servers"] = args.upstream
        try:
            loaded = load_settings(
                config_file=args.config,
                overrides=overrides,
                override_origins={"listeners": "--listen", "log.dirs": "--data-dir"},
                sets=args.set,
            )
            check_data_dir_is_ours(loaded.config, allow_foreign=args.force_data_dir)
        except ConfigError as e:
            return _error(p, str(e))
        # The data directory's lock before anything else reads or changes it (Kafka's
        # LogManager): a second server on a live directory stops here, having changed nothing.
        try:
            lock = DataDirLock.acquire(loaded.config.data_dir)
        except (DataDirLockedError, OSError) as e:
            structlog.get_logger("gateway").error("gateway.start_failed", error=str(e))
            return 1
        try:
            check_data_dir(loaded.config, allow_foreign=args.force_data_dir)
        except ConfigError as e:
            lock.release()
            return _error(p, str(e))
        if loaded.ignored_kafka_keys:
            structlog.get_logger("gateway").warning(
                "config.kafka_keys_ignored",
                keys=list(loaded.ignored_kafka_keys),
                reason="Kafka broker settings that groupshift does not use",
            )
        extensions: list[Extension] = [install_group_layer]
        if loaded.config.upstream is not None:
            from gateway.upstream import install_upstream_mode

            extensions = [install_upstream_mode]
        return serve(
            loaded.config,
            extensions=extensions,
            data_dir_lock=lock,
            ignore_topics_file=args.ignore_topics_file,
        )

    p.set_defaults(run=run)


_RECORDS_DUMP_EPILOG = """\
PATH is one of:
  a data directory    groupshift's --data-dir: every coordinator log in <data dir>/coordinator
  a coordinator dir   <data dir>/coordinator, or a Kafka broker's log directory: every
                      __consumer_offsets-N log in it, each under a "log: NAME" line
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

--group GROUP prints only that group's records; with a data or coordinator directory it
reads only the log that holds the group (Kafka's partitionFor over the number of logs).

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
    d.add_argument(
        "path",
        metavar="PATH",
        help="data directory, coordinator directory, log directory, .log segment or raw-pairs text file",
    )
    d.add_argument("--json", action="store_true", help="print one JSON object per record")
    d.add_argument("--group", metavar="GROUP", help="only the records of this group")
    from tools.records_transfer import add_commands

    add_commands(records_sub)

    def run_dump(args: argparse.Namespace) -> int:
        from gateway.groups.routing import partition_for
        from records.dump import dump

        return dump(args.path, as_json=args.json, group=args.group, shard_for=partition_for)

    def usage(args: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(run=usage)
    d.set_defaults(run=run_dump)


def _add_groups(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from tools.groups.command import add_parser

    add_parser(sub)


def _add_kafka(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "kafka",
        help="a reference Apache Kafka from Maven Central: start a local cluster, list versions",
        description=(
            "Reference Apache Kafka for comparisons and migrations (docs/kafka-in-the-loop.md). "
            "Needs Java 17+ and Maven; releases are cached under ~/.cache/groupshift/kafka."
        ),
    )
    from harness.kafka_dist.commands import add_arguments

    add_arguments(p)


def _error(parser: argparse.ArgumentParser, message: str) -> int:
    """`PROG: error: message` on stderr and exit status 2, like argparse, without the usage."""
    lines = message.splitlines() or [""]
    sys.stderr.write("".join(f"{parser.prog}: error: {line}\n" for line in lines))
    return 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="groupshift",
        description=(
            "A Kafka wire-protocol server for consumer groups of both protocols (classic and "
            "KIP-848) and the migration between them."
        ),
    )
    parser.add_argument("--version", action="version", version=f"groupshift {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_simulate(sub)
    _add_serve(sub)
    _add_records(sub)
    _add_groups(sub)
    _add_kafka(sub)
    __import__("tools.check.command", fromlist=["add_parser"]).add_parser(sub)
    __import__("harness.matrix.command", fromlist=["add_parser"]).add_parser(sub)
    __import__("tools.fleet.command", fromlist=["add_parser"]).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        run: Runner | None = getattr(args, "run", None)
        if run is None:
            parser.print_help()
            return 2
        return run(args)
    except BrokenPipeError:
        return _stdout_gone()


def _stdout_gone() -> int:
    """The reader of stdout went away (`groupshift ... | head`): stop quietly. stdout is
    pointed at /dev/null so that the interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 0

"""The `groupshift` command. Subcommands import their layer lazily so `--version` stays instant."""

from __future__ import annotations

import argparse
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

    def run(args: argparse.Namespace) -> int:
        from engine.simulate import main as simulate_main

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
    p.add_argument("--listen", metavar="HOST:PORT", help="listener (`listeners`, default "
                   "127.0.0.1:9092; port 0 picks a free port)")
    p.add_argument("--data-dir", metavar="DIR", help="data directory (`log.dirs`, default "
                   "./groupshift-data)")
    p.add_argument("--config", metavar="FILE", help="Java-properties file of NAME=VALUE lines")
    p.add_argument("--set", metavar="NAME=VALUE", action="append", default=[],
                   help="one setting by its Kafka name, e.g. --set num.partitions=6 (repeatable)")
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="groupshift", description=__doc__)
    parser.add_argument("--version", action="version", version=f"groupshift {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_simulate(sub)
    _add_serve(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Runner | None = getattr(args, "run", None)
    if run is None:
        parser.print_help()
        return 2
    return run(args)

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="groupshift", description=__doc__)
    parser.add_argument("--version", action="version", version=f"groupshift {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_simulate(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Runner | None = getattr(args, "run", None)
    if run is None:
        parser.print_help()
        return 2
    return run(args)

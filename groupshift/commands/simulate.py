"""`groupshift simulate`: consumer-group scenarios through the sans-IO engine on a virtual clock,
printed after each step in the format of KIP-848's case studies (group epoch, target assignment,
every member's epoch, state and partitions); migration scenarios mix classic members
(JoinGroup/SyncGroup, eager range) and KIP-848 members in one group. `--chaos` runs the
deterministic whole-coordinator simulator with faults instead (sim.chaos, docs/simulation.md), and
`--chaos --streams` its streams-group version (sim.streams_chaos), `--chaos --connect` its
Connect-group version (sim.connect_chaos). The
scenarios themselves live in sim/; this module only parses and dispatches.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any, summary: str) -> argparse.ArgumentParser:
    """The `simulate` parser; `summary` is its line in `groupshift --help` (groupshift.cli.COMMANDS)."""
    p: argparse.ArgumentParser = sub.add_parser(
        "simulate",
        help=summary,
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
    p.add_argument("--steps", type=_at_least_one, default=30, help="steps for --scenario random (>= 1)")
    p.add_argument(
        "--assignor", default="uniform", choices=ASSIGNORS, help="server assignor (uniform | range)"
    )
    p.add_argument(
        "--chaos",
        action="store_true",
        help="run the deterministic whole-coordinator simulator with faults instead (docs/simulation.md)",
    )
    p.add_argument(
        "--seeds", type=_at_least_one, default=1, help="--chaos: seeds --seed .. --seed+N-1 (N >= 1)"
    )
    p.add_argument("--keep-going", action="store_true", help="--chaos: run every seed after a violation")
    p.add_argument(
        "--client-assignors",
        action="store_true",
        help=(
            "--chaos: with group.consumer.client.assignors.enable=true and members running client-side "
            "assignors (PrepareAssignment/InstallAssignment, their faults; docs/simulation.md)"
        ),
    )
    p.add_argument(
        "--streams",
        action="store_true",
        help="--chaos: streams-group members (StreamsGroupHeartbeat, KIP-1071) instead (sim.streams_chaos)",
    )
    p.add_argument(
        "--connect",
        action="store_true",
        help=(
            "--chaos: Connect workers of the worker SDK (ConnectGroupHeartbeat, PrepareAssignment/"
            "InstallAssignment, the incremental cooperative assignor) instead (sim.connect_chaos)"
        ),
    )
    p.set_defaults(run=run, simulate_parser=p)
    return p


ASSIGNORS = ("uniform", "range")  # the engine's server assignors (engine.assignors)


def _at_least_one(text: str) -> int:
    """A count of 1 or more: 0 or less would run nothing and still say it passed."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def run(args: argparse.Namespace) -> int:
    """Run the scenario (or the chaos seeds) and print it on stdout."""
    if args.client_assignors and not args.chaos:
        args.simulate_parser.error("--client-assignors needs --chaos")
    if args.client_assignors and args.streams:
        args.simulate_parser.error("--client-assignors and --streams are separate simulations: choose one")
    if args.streams and not args.chaos:
        args.simulate_parser.error("--streams needs --chaos")
    if args.connect and not args.chaos:
        args.simulate_parser.error("--connect needs --chaos")
    if args.connect and (args.streams or args.client_assignors):
        args.simulate_parser.error(
            "--connect is a separate simulation: not with --streams or --client-assignors"
        )
    if args.chaos and args.connect:
        from sim.connect_chaos import main as connect_chaos_main

        return connect_chaos_main(args.seed, args.steps, args.seeds, sys.stdout, keep_going=args.keep_going)
    if args.chaos and args.streams:
        from sim.streams_chaos import main as streams_chaos_main

        return streams_chaos_main(args.seed, args.steps, args.seeds, sys.stdout, keep_going=args.keep_going)
    if args.chaos:
        from sim.chaos import main as chaos_main

        if args.client_assignors:
            from sim.client_assignment_chaos import ClientAssignorMachine

            return chaos_main(
                args.seed,
                args.steps,
                args.seeds,
                sys.stdout,
                keep_going=args.keep_going,
                machine=ClientAssignorMachine,
            )
        return chaos_main(args.seed, args.steps, args.seeds, sys.stdout, keep_going=args.keep_going)
    from sim.migration_scenarios import SCENARIOS as MIGRATIONS
    from sim.migration_scenarios import main as migration_main
    from sim.scenarios import SCENARIOS as SIMPLE
    from sim.scenarios import main as simulate_main

    if args.scenario not in MIGRATIONS and args.scenario not in SIMPLE and args.scenario != "random":
        known = ", ".join([*SIMPLE, "random", *MIGRATIONS])
        args.simulate_parser.error(f"unknown scenario {args.scenario!r} (known: {known})")
    if args.scenario in MIGRATIONS:
        return migration_main(args.scenario, assignor=args.assignor, out=sys.stdout)
    return simulate_main(
        args.scenario, seed=args.seed, steps=args.steps, assignor=args.assignor, out=sys.stdout
    )

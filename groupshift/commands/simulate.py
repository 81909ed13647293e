"""`groupshift simulate`: consumer-group scenarios through the sans-IO engine on a virtual clock,
printed after each step in the format of KIP-848's case studies (group epoch, target assignment,
every member's epoch, state and partitions); migration scenarios mix classic members
(JoinGroup/SyncGroup, eager range) and KIP-848 members in one group. `--chaos` runs the
deterministic whole-coordinator simulator with faults instead (docs/simulation.md).
"""

from __future__ import annotations

import argparse
import os
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
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Run the scenario (or the chaos seeds) and print it on stdout."""
    if args.chaos:
        return _run_chaos(args)
    from engine.simulate import main as simulate_main
    from translation.simulate import SCENARIOS as MIGRATIONS
    from translation.simulate import main as migration_main

    if args.scenario in MIGRATIONS:
        return migration_main(args.scenario, assignor=args.assignor, out=sys.stdout)
    return simulate_main(
        args.scenario, seed=args.seed, steps=args.steps, assignor=args.assignor, out=sys.stdout
    )


def _run_chaos(args: argparse.Namespace) -> int:
    # replaced by sim.chaos after merge: `sim/chaos.py` does not exist on this branch yet (mypy
    # --strict refuses the import), so this still loads tests/chaos.py by name. After the merge
    # the whole body becomes:
    #     from sim.chaos import main
    #
    #     return main(args.seed, args.steps, args.seeds, sys.stdout, keep_going=args.keep_going)
    import importlib

    # The installed `groupshift` script does not put the working directory on sys.path (only
    # `python -m groupshift` does): find tests/ next to this package's own source checkout.
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.isfile(os.path.join(checkout, "tests", "chaos.py")) and checkout not in sys.path:
        sys.path.insert(0, checkout)
    try:
        # imported by name: the simulator lives in tests/ (it reuses the test suite's clients)
        chaos = importlib.import_module("tests.chaos")
    except ImportError as e:
        print(
            f"groupshift simulate --chaos runs tests/chaos.py of a source checkout (an editable "
            f"install with the test extras): {e}",
            file=sys.stderr,
        )
        return 2
    result: int = chaos.main(args.seed, args.steps, args.seeds, sys.stdout, keep_going=args.keep_going)
    return result

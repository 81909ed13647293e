"""`groupshift matrix run|list`: the version-matrix e2e runner (README "Version matrix").

Exit status of `run`: 0 no cell failed (cells whose client library is not installed are "not
run", counted apart), 1 a cell failed, 2 usage (unknown grid, bad --only,
unavailable runtime).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness.matrix.builtin import GRIDS


def add_parser(sub: Any, summary: str) -> argparse.ArgumentParser:
    """The `matrix` parser; `summary` is its line in `groupshift --help` (groupshift.cli.COMMANDS)."""
    p: argparse.ArgumentParser = sub.add_parser(
        "matrix",
        help=summary,
        description=(
            "Version matrix: verifiable consumers of each client library and version go through "
            "migration scenarios against groupshift and a reference Apache Kafka; each cell is "
            "judged by invariant checks over the clients' event streams."
        ),
    )
    ms = p.add_subparsers(dest="matrix_command", metavar="SUBCOMMAND")
    run = ms.add_parser("run", help="run a grid and write results.json, junit.xml, report.html")
    ls = ms.add_parser("list", help="print a grid's cells (and, with --dropped, what does not apply)")
    for q in (run, ls):
        q.add_argument("--grid", default="smoke", help=f"{' | '.join(GRIDS)} | a TOML file (default smoke)")
        q.add_argument(
            "--only",
            metavar="FILTER",
            help="comma-separated globs, all must match; !TERM must not, e.g. scenario=rolling-*,!java@*",
        )
    run.add_argument("--jobs", type=int, default=2, help="cells at a time (default 2)")
    run.add_argument(
        "--runtime",
        choices=["process", "docker"],
        default="process",
        help="run each cell's clients as local processes or in containers (default process)",
    )
    run.add_argument(
        "--rerun-failed", action="store_true", help="run only the cells DIR/results.json has as failed"
    )
    run.add_argument(
        "--out", default="matrix-results", metavar="DIR", help="output directory (default matrix-results)"
    )
    ls.add_argument(
        "--dropped", action="store_true", help="also list combinations that do not apply, and why"
    )
    run.set_defaults(run=_run)
    ls.set_defaults(run=_list)

    def usage(args: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(run=usage)
    return p


def _grid(args: argparse.Namespace) -> Any:
    from harness.matrix.grid import load_grid

    return load_grid(args.grid).only(args.only)


def _list(args: argparse.Namespace) -> int:
    try:
        grid = _grid(args)
    except ValueError as e:
        print(f"groupshift matrix: {e}", file=sys.stderr)
        return 2
    for cell in grid.cells:
        print(cell.id)
    if args.dropped:
        for cell, why in grid.dropped:
            print(f"# {cell.id}: {why}")
    print(f"# {len(grid.cells)} cells", file=sys.stderr)
    return 0


def _run(args: argparse.Namespace) -> int:
    from harness.matrix.runner import RuntimeUnavailable, run_grid
    from harness.matrix.runtime import NOT_RUN

    try:
        grid = _grid(args)
    except ValueError as e:
        print(f"groupshift matrix: {e}", file=sys.stderr)
        return 2
    if args.jobs < 1:
        print(f"groupshift matrix: --jobs must be 1 or more, got {args.jobs}", file=sys.stderr)
        return 2
    if not grid.cells:
        print("groupshift matrix: no cells to run (check --grid and --only)", file=sys.stderr)
        return 2
    out = Path(args.out)
    print(
        f"groupshift matrix: grid {grid.name}, {len(grid.cells)} cells, "
        f"runtime {args.runtime}, jobs {args.jobs}"
    )
    try:
        rows = run_grid(grid, out, jobs=args.jobs, runtime_name=args.runtime, rerun_failed=args.rerun_failed)
    except RuntimeUnavailable as e:
        print(f"groupshift matrix: {e}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"groupshift matrix: {e}", file=sys.stderr)
        return 2
    failed = [r for r in rows if r["verdict"] not in ("pass", NOT_RUN)]
    not_run = [r for r in rows if r["verdict"] == NOT_RUN]
    passed = len(rows) - len(failed) - len(not_run)
    print(
        f"{len(rows)} cells, {passed} passed, {len(failed)} failed, {len(not_run)} not run "
        f"(client library not installed); report: {out / 'report.html'}"
    )
    return 1 if failed else 0

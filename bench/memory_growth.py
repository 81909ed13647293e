"""Which code keeps memory: compare two tracemalloc snapshots written by a gateway that ran with
`GROUPSHIFT_TRACEMALLOC=DIR` (gateway/server.py), or with `--census` two heap censuses written
with `GROUPSHIFT_HEAP_CENSUS=DIR` (gateway/heap_census.py: no tracing cost between samples).

`python -m bench.memory_growth DIR [--first N] [--last M] [--top K] [--json]` compares snapshot N
(default: the second, after warm-up) with snapshot M (default: the newest), grouped by the
allocating line with its call chain, and prints the K biggest growths. A leak per departed
member shows up as a line whose growth keeps rising from snapshot to snapshot; allocator
fragmentation shows up as RSS growth with no traced growth behind it.
"""

from __future__ import annotations

import argparse
import json
import tracemalloc
from pathlib import Path
from typing import Any

IGNORED = (
    tracemalloc.Filter(False, tracemalloc.__file__),
    tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
    tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"),
    tracemalloc.Filter(False, "<unknown>"),
)


def growth(first: Path, last: Path, top: int, frames: int) -> dict[str, Any]:
    a = tracemalloc.Snapshot.load(str(first)).filter_traces(IGNORED)
    b = tracemalloc.Snapshot.load(str(last)).filter_traces(IGNORED)
    total_a = sum(s.size for s in a.statistics("filename"))
    total_b = sum(s.size for s in b.statistics("filename"))
    diffs = b.compare_to(a, "traceback")
    rows = []
    for d in sorted(diffs, key=lambda d: d.size_diff, reverse=True)[:top]:
        rows.append(
            {
                "size_diff": d.size_diff,
                "count_diff": d.count_diff,
                "size": d.size,
                "traceback": [f"{f.filename}:{f.lineno}" for f in list(d.traceback)[-frames:]],
            }
        )
    return {
        "first": first.name,
        "last": last.name,
        "traced_first": total_a,
        "traced_last": total_b,
        "top": rows,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.memory_growth")
    p.add_argument("dir", type=Path)
    p.add_argument("--first", type=int, default=2)
    p.add_argument("--last", type=int, default=0, help="0: the newest snapshot")
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--frames", type=int, default=6)
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--census", action="store_true", help="compare census-*.json (GROUPSHIFT_HEAP_CENSUS) instead"
    )
    args = p.parse_args(argv)
    if args.census:
        return _census(p, args)
    snaps = sorted(args.dir.glob("snapshot-*.pickle"))
    if len(snaps) < 2:
        p.error(f"need two snapshots in {args.dir}, found {len(snaps)}")
    first = snaps[min(args.first, len(snaps) - 1) - 1]
    last = snaps[args.last - 1] if args.last else snaps[-1]
    result = growth(first, last, args.top, args.frames)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{result['first']} -> {result['last']}: traced "
        f"{result['traced_first'] / 1e6:.1f} MB -> {result['traced_last'] / 1e6:.1f} MB"
    )
    for row in result["top"]:
        print(f"{row['size_diff'] / 1e3:+10.1f} kB {row['count_diff']:+8d} blocks")
        for frame in row["traceback"]:
            print(f"      {frame}")
    return 0


def _census(p: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Two heap censuses compared: the types and the named containers that grew most."""
    from gateway.heap_census import compare

    samples = sorted(args.dir.glob("census-*.json"))
    if len(samples) < 2:
        p.error(f"need two census files in {args.dir}, found {len(samples)}")
    first = samples[min(args.first, len(samples) - 1) - 1]
    last = samples[args.last - 1] if args.last else samples[-1]
    result = compare(json.loads(first.read_text()), json.loads(last.read_text()), args.top)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{first.name} -> {last.name} ({result['minutes']} min): blocks {result['blocks_diff']:+d}, "
        f"tracked objects {result['tracked_diff']:+d}"
    )
    for row in result["types"]:
        print(f"{row['size_diff'] / 1e3:+10.1f} kB {row['count_diff']:+8d}  {row['type']}")
    print("dict and tuple shapes whose count grew most:")
    for row in result["shapes"]:
        print(f"{row['count_diff']:+8d}  {row['shape']}")
    print("biggest containers:")
    for c in result["containers"]:
        print(
            f"{c['size_diff'] / 1e3:+10.1f} kB  {c['size'] / 1e3:9.1f} kB"
            f"  len {c['len_before']} -> {c['len']}  {c['type']} held by {c['held_by']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Output of `groupshift groups`: aligned tables for people, JSON for scripts, and exit codes.

Tables use the column headers of Kafka's `kafka-consumer-groups.sh` (ConsumerGroupCommand) word
for word and its `-` for a missing value, so a person or a script that reads one reads the other;
columns are as wide as their widest cell. Colour (bold headers, a warning colour for lag and
pending partitions) only when stdout is a terminal and NO_COLOR is unset (no-color.org).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

MISSING = "-"

# Exit codes (documented in the README's "groups" section).
OK = 0
ERROR = 1  # a broker error, an unreachable cluster, or a failed partition in a mutation
USAGE = 2  # bad arguments (argparse also exits 2)
NOT_FOUND = 3  # the group does not exist
REFUSED = 4  # the group is active: offsets cannot be reset/deleted, the group cannot be deleted


def use_colour(out: TextIO) -> bool:
    return out.isatty() and "NO_COLOR" not in os.environ


class Style:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled else text

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def warn(self, text: str) -> str:
        return self._wrap("33", text)

    def bad(self, text: str) -> str:
        return self._wrap("31", text)

    def good(self, text: str) -> str:
        return self._wrap("32", text)


def cell(value: object) -> str:
    return MISSING if value is None or value == "" else str(value)


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    style: Style,
    highlight: dict[int, Any] | None = None,
) -> str:
    """Left-aligned columns separated by one space (as Kafka's tool prints them). `highlight`
    maps a column index to a predicate on the cell text; matching cells get the warning colour."""
    text = [[cell(v) for v in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in text]) for i, h in enumerate(headers)]
    lines = [" ".join(style.bold(h.ljust(w)) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for r in text:
        parts = []
        for i, (v, w) in enumerate(zip(r, widths, strict=True)):
            padded = v.ljust(w)
            if highlight and i in highlight and highlight[i](v):
                padded = style.warn(padded)
            parts.append(padded)
        lines.append(" ".join(parts).rstrip())
    return "\n".join(lines)


def assignment_string(parts: dict[str, list[int]] | None) -> str:
    """`topic:0,1;other:2` as Kafka's tool writes CURRENT-ASSIGNMENT and TARGET-ASSIGNMENT."""
    if not parts or not any(parts.values()):
        return MISSING
    return ";".join(f"{t}:{','.join(str(p) for p in sorted(ps))}" for t, ps in sorted(parts.items()) if ps)


def partition_ranges(tps: Iterable[tuple[str, int]]) -> str:
    """`orders:0-5,7;payments:1`: a person reads a 12-partition assignment at a glance. Kafka's
    `kafka-consumer-groups.sh` lists every partition (`orders:0,1,2,3,4,5,7`), and `describe`
    keeps that format for parity; the migration view and `check` print ranges. "" for none."""
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    out = []
    for topic, ps in sorted(by_topic.items()):
        runs: list[list[int]] = []
        for p in sorted(set(ps)):
            if runs and p == runs[-1][1] + 1:
                runs[-1][1] = p
            else:
                runs.append([p, p])
        out.append(f"{topic}:" + ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs))
    return ";".join(out)


def emit_json(value: Any, out: TextIO | None = None) -> None:
    (out or sys.stdout).write(json.dumps(value, indent=2, sort_keys=False) + "\n")


def error(message: str, err: TextIO | None = None) -> None:
    (err or sys.stderr).write(f"Error: {message}\n")

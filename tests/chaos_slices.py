"""What every chaos simulator's CI slice checks (tests/test_streams_chaos.py,
tests/test_client_assignment_chaos.py, tests/test_sim_connect.py; docs/simulation.md)."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import TextIO

from sim.chaos import SeedResult


def run_slice(
    main: Callable[[int, int, int, TextIO], int], seeds: int, steps: int, seen: Iterable[str]
) -> str:
    """Seeds 1..`seeds` of `steps` faulty steps, the quiet tail and the settling: 0 violations,
    and each event of `seen` counted in the summary (a slice that injects nothing proves
    nothing). Returns the summary."""
    out = io.StringIO()
    assert main(1, steps, seeds, out) == 0, out.getvalue()
    summary = out.getvalue()
    assert f"{seeds} seeds from 1" in summary and "0 violations" in summary
    for event in seen:
        assert f"  {event}: " in summary, (event, summary)
    return summary


def replays_exactly(run_seed: Callable[[int, int], SeedResult], seed: int, steps: int) -> None:
    """A seed run twice makes the same events and the same log; the next seed another log."""
    a, b = run_seed(seed, steps), run_seed(seed, steps)
    assert a.stats == b.stats and a.digest == b.digest
    assert run_seed(seed + 1, steps).digest != a.digest

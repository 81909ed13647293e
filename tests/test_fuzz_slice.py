"""CI slice of the fuzz targets (fuzz/): a few thousand mutated inputs per target, seeded.

The long runs (10^6 inputs per target, coverage-guided with atheris) are `python -m fuzz TARGET
--runs 1000000`; their figures are in docs/robustness.md. Here the dependency-free mutator runs
each target from a fixed seed, so a failure reproduces with `python -m fuzz TARGET --engine
random --runs N --seed S`. Besides "no finding", each target must both accept some inputs and
refuse some cleanly: a harness that refuses everything (or nothing) exercises nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog

from fuzz import NAMES, target
from fuzz.__main__ import quiet_logs
from fuzz.common import run_random

RUNS = 4000


@pytest.fixture(autouse=True)
def _restore_structlog() -> Iterator[None]:
    """`quiet_logs` configures structlog for the whole process; put the configuration back so
    that later tests (which capture warnings) see their events."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


@pytest.mark.parametrize("name", NAMES)
def test_fuzz_target_slice(name: str) -> None:
    quiet_logs()
    t = target(name)
    t.outcomes.clear()
    result = run_random(t, RUNS, seed=11)
    assert result.findings == [], result.findings[0]
    assert result.runs == RUNS
    assert result.outcomes.get("ok", 0) > 0, result.outcomes
    if t.clean:
        assert sum(v for k, v in result.outcomes.items() if k != "ok") > 0, result.outcomes


def test_every_seed_decodes() -> None:
    """Seeds are real encodings: each one is accepted (else the corpus tests only refusals)."""
    quiet_logs()
    for name in NAMES:
        t = target(name)
        t.outcomes.clear()
        seeds = t.seeds()
        for s in seeds:
            t.check(s)
        refused = {k: v for k, v in t.outcomes.items() if k != "ok"}
        # the embedded target's seeds include one future version (read as v3): still "ok";
        # streams_records' seeds include the group's own tombstone while it has members, which
        # replay refuses (the load would stop there)
        expected: dict[str, int] = {"ReplayRefused": 1} if name == "streams_records" else {}
        assert refused == expected or name == "batches", (name, refused)


def test_framing_refuses_a_negative_size_and_keeps_earlier_answers() -> None:
    """A regression shape for the framing target: frames before a bad size are answered in order."""
    from fuzz.framing import _SIZE, one_input

    stream = _SIZE.pack(3) + b"abc" + _SIZE.pack(0) + _SIZE.pack(-5) + b"zz"
    one_input(bytes([255, 0x33]) + stream)  # asserts frames, close and order internally


def test_requests_target_covers_every_served_api() -> None:
    from fuzz.requests import served

    keys = {k for k, _ in served()}
    assert {8, 9, 10, 11, 12, 13, 14, 18, 68} <= keys, sorted(keys)

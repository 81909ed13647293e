"""The migration benchmark still runs: `python -m bench.migration --quick --json` against a real
gateway with real clients reports every default case with finite, non-negative figures."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from bench.migration import DEFAULT_CASES
from e2e.harness import REPO

FIGURES = (
    "form_s",
    "roll_unowned_partition_s",
    "roll_s",
    "add_settle_s",
    "add_unowned_partition_s",
    "gateway_cpu_s",
)


@pytest.mark.timeout(60)
def test_migration_benchmark_quick() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench.migration", "--quick", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=55,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert doc["gateway_errors"] == 0
    results = {r["case"]: r for r in doc["results"]}
    assert sorted(results) == sorted(DEFAULT_CASES)
    for case, r in results.items():
        for name in FIGURES:
            value = r[name]
            assert isinstance(value, int | float) and math.isfinite(value) and value >= 0, (case, name, value)
        first = r["add_first_assignment_s"]
        assert first is not None and 0 <= first <= r["add_settle_s"]
        assert len(r["roll_step_s"]) == doc["settings"]["members"]
        assert r["overlaps"] == 0, f"{case}: a partition was owned by two live members at once"
        assert r["records_skipped"] == 0, f"{case}: committed past records no member received"

"""Hypothesis settings for the stateful tests: a CI-sized default and a long run on demand.

`STATEFUL_EXAMPLES=3000 python -m pytest tests/test_consumer_stateful.py` runs the same machine
with 3000 examples (`STATEFUL_STEPS` sets the steps per example); the default keeps the whole
suite well inside CI's time budget.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings


def stateful_settings(max_examples: int, step_count: int, *, filtered: bool = False) -> settings:
    """`filtered` for machines whose rules' preconditions reject many draws."""
    checks = [HealthCheck.too_slow] + ([HealthCheck.filter_too_much] if filtered else [])
    return settings(
        max_examples=int(os.environ.get("STATEFUL_EXAMPLES", max_examples)),
        stateful_step_count=int(os.environ.get("STATEFUL_STEPS", step_count)),
        deadline=None,
        suppress_health_check=checks,
        report_multiple_bugs=False,
    )

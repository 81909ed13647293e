"""Hypothesis settings for the stateful tests: a CI-sized default and a long run on demand.

`STATEFUL_EXAMPLES=3000 python -m pytest tests/test_consumer_stateful.py` runs the same machine
with 3000 examples; the default keeps the whole suite well inside CI's time budget.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings


def stateful_settings(max_examples: int, step_count: int) -> settings:
    return settings(
        max_examples=int(os.environ.get("STATEFUL_EXAMPLES", max_examples)),
        stateful_step_count=step_count,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )

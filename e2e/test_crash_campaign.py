"""CI slice of the crash campaign (bench/crash_campaign.py): 3 SIGKILLs of a real gateway.

The full run is `python -m bench.crash_campaign --kills 100` (figures in docs/robustness.md).
Here: kafka-python (classic), confluent-kafka (KIP-848, converting the group) and raw simple
commits run against `groupshift serve`, the gateway is SIGKILLed three times at seeded random
moments, every restart must open its logs, and every commit a client saw acknowledged must be
returned by OffsetFetch afterwards.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.crash_campaign import campaign

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_three_kills_lose_no_acknowledged_commit(tmp_path: Path) -> None:
    result = campaign(3, seed=7, min_delay=1.0, max_delay=5.0, data_dir=tmp_path)
    print(f"crash campaign slice: {result}")
    assert result["failed_restarts"] == []
    assert result["kills"] == 3
    assert result["lost"] == 0, result["lost_detail"]
    assert result["acknowledged_commits"] > 0
    assert result["worker_errors_before_kill"] == []
    assert result["acknowledged_by_client"].get("simple", 0) > 0

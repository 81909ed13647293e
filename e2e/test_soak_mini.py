"""CI slice of the soak (bench/soak.py): 20 seconds of heartbeats with members coming and going.

The full run is `python -m bench.soak --minutes 30 --members 10000` (figures in
docs/robustness.md). Here 500 KIP-848 members heartbeat every second while 20 a second leave
(half with epoch -1, half by going silent until their 6 s session expires) and as many join,
against a real gateway with a small compaction threshold. Bounds that a leak would break:
RSS grows by less than 25 MB after the first quarter, the coordinator timers stay within the
members plus those waiting to expire, and compaction keeps the log under a bound.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.soak import run

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

MEMBERS, CHURN, SESSION_S = 500, 20.0, 6


def test_mini_soak_stays_bounded(tmp_path: Path) -> None:
    result = run(
        minutes=20 / 60,
        members=MEMBERS,
        group_size=50,
        churn_per_s=CHURN,
        heartbeat_ms=1000,
        session_ms=SESSION_S * 1000,
        compaction_min_bytes=32 * 1024,
        sample_s=2.0,
        gateway_core=None,
        data_dir=tmp_path,
    )
    s = result["summary"]
    print(f"mini soak: {s} errors={result['errors']}")
    assert result["failures"] == [] and result["gateway_alive_at_end"]
    assert result["heartbeats"] > MEMBERS * 5  # members kept heartbeating through the run
    assert result["joins"] > 100 and result["leaves"] > 20 and result["abandoned"] > 20
    after = s["rss_mb_after_warmup"]
    assert after["max"] - after["min"] < 25, after
    # one session timer per live member, plus silent members until their session expires
    # (CHURN/2 per second for SESSION_S seconds) and a margin for rebalance timers
    bound = MEMBERS + CHURN / 2 * (SESSION_S + 3) + 0.2 * MEMBERS
    assert 0 < s["timers"]["max"] <= bound, (s["timers"], bound)
    assert s["timers"]["last"] >= 0.8 * MEMBERS, s["timers"]
    # A member fenced (UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH) had not heartbeated for longer
    # than its session (the load generator fell behind on a loaded machine); one fenced sooner
    # would be the gateway's fault. And no leave overtakes its member's heartbeat.
    fenced = result["fenced"]
    assert fenced["while_heartbeating"] == fenced["gap_over_session_timeout"], fenced
    assert fenced["heartbeat_after_own_leave"] == 0, fenced
    assert s["compactions"] >= 1
    assert s["log_bytes"]["max"] < 16 * 1024 * 1024, s["log_bytes"]

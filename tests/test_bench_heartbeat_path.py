"""`bench.heartbeat_path` runs both kinds end to end in process and every steady heartbeat it
times is answered without an error (it raises otherwise)."""

from __future__ import annotations

import asyncio

from bench.heartbeat_path import measure


def test_both_kinds_measure_answered_heartbeats() -> None:
    for kind, members in (("cgh", 20), ("heartbeat", 2)):
        r = asyncio.run(measure(kind, 2, 10, 0.2, 8))
        assert r["members"] == members
        assert r["requests"] >= 8 and r["requests"] % 8 == 0
        assert r["requests_per_cpu_s"] > 0

"""The event-loop lag monitor (`gateway.loop_lag`) and the warning rate limiter
(`gateway.log_rate`): lags are kept as a max per scrape, a lag over the threshold warns
`loop.blocked` at most once per interval with the count suppressed, and a real blocked loop is
seen."""

from __future__ import annotations

import asyncio
import time

import structlog

from gateway.log_rate import RateLimiter
from gateway.loop_lag import LoopLagMonitor
from gateway.metrics import MetricsRegistry


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_max_lag_per_scrape_and_rate_limited_warning() -> None:
    clock = FakeClock()
    monitor = LoopLagMonitor(0.2, warn_every_s=10.0, clock=clock)
    with structlog.testing.capture_logs() as logs:
        for lag in (0.01, 0.3, 0.05):
            monitor.observe(lag)
        assert monitor.scrape() == 0.3 and monitor.scrape() == 0.0
        clock.now += 1
        monitor.observe(0.5)  # within 10 s of the first warning: suppressed
        clock.now += 10
        monitor.observe(0.25)
    warnings = [e for e in logs if e["event"] == "loop.blocked"]
    assert [(w["lag_ms"], w["suppressed"], w["log_level"]) for w in warnings] == [
        (300.0, 0, "warning"),
        (250.0, 1, "warning"),
    ]
    assert monitor.blocked == 3 and monitor.max_ever == 0.5


def test_metrics_are_exposed() -> None:
    metrics = MetricsRegistry()
    monitor = LoopLagMonitor(0.2)
    monitor.register_metrics(metrics)
    monitor.observe(0.125)
    monitor.observe(0.25)
    text = metrics.render()
    assert "groupshift_event_loop_lag_seconds 0.25" in text
    assert "groupshift_event_loop_lag_max_seconds 0.25" in text
    assert "# TYPE groupshift_event_loop_blocked_total counter" in text
    assert "groupshift_event_loop_blocked_total 1" in text


def test_a_blocked_loop_is_measured() -> None:
    async def main() -> float:
        monitor = LoopLagMonitor(0.05, interval_s=0.01)
        monitor.start(asyncio.get_running_loop())
        await asyncio.sleep(0.03)
        time.sleep(0.15)  # block the loop
        await asyncio.sleep(0.03)
        monitor.stop()
        return monitor.max_ever

    assert asyncio.run(main()) >= 0.1


def test_rate_limiter_counts_what_it_drops() -> None:
    clock = FakeClock()
    limiter = RateLimiter(10.0, clock=clock)
    assert limiter.allow("a") == 0
    assert limiter.allow("a") is None and limiter.allow("a") is None
    assert limiter.allow("b") == 0  # per key
    clock.now += 10
    assert limiter.allow("a") == 2

"""Event-loop lag: how late a periodic timer fires, as a metric and a rate-limited warning.

Not a Kafka behaviour: Kafka serves requests on a pool of threads, so one slow request delays
only itself; groupshift serves every group from one asyncio event loop, so anything that runs
long on it (work that grows with the cluster) delays every group's heartbeats at once. The
monitor measures that directly: a timer due every `INTERVAL_S` records how late it ran.

  * `groupshift_event_loop_lag_seconds` (gauge): the largest lag since the previous scrape (reset
    by the scrape), so a stall between two scrapes is never averaged away;
  * `groupshift_event_loop_lag_max_seconds` (gauge): the largest lag since start;
  * `groupshift_event_loop_blocked_total` (counter): lags longer than `loop.lag.warn.ms`;
  * warning `loop.blocked` (lag_ms, threshold_ms, suppressed) when a lag exceeds `loop.lag.warn.ms`,
    at most one per `WARN_EVERY_S`; the next one says how many were suppressed meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from gateway.metrics import MetricsRegistry

log = structlog.get_logger("gateway.loop")

INTERVAL_S = 0.05  # how often the timer is due: a stall shorter than this may go unseen
WARN_EVERY_S = 10.0  # at most one `loop.blocked` warning per this many seconds


class LoopLagMonitor:
    """Schedules itself on the loop every `interval_s` and records how late it runs."""

    def __init__(
        self,
        warn_after_s: float,
        *,
        interval_s: float = INTERVAL_S,
        warn_every_s: float = WARN_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.warn_after_s = warn_after_s
        self.interval_s = interval_s
        self.warn_every_s = warn_every_s
        self._clock = clock
        self.max_since_scrape = 0.0
        self.max_ever = 0.0
        self.blocked = 0  # lags over the threshold since start
        self._suppressed = 0
        self._last_warning: float | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._on_blocked: Callable[[], None] | None = None
        self._due = 0.0

    def register_metrics(self, metrics: MetricsRegistry) -> None:
        metrics.gauge(
            "groupshift_event_loop_lag_seconds",
            "Largest event-loop lag since the previous scrape (how late a 50 ms timer ran)",
        ).set_function(self.scrape)
        metrics.gauge(
            "groupshift_event_loop_lag_max_seconds", "Largest event-loop lag since start"
        ).set_function(lambda: self.max_ever)
        blocked = metrics.counter(
            "groupshift_event_loop_blocked_total", "Event-loop lags longer than loop.lag.warn.ms"
        )
        self._on_blocked = blocked.inc

    def scrape(self) -> float:
        """The largest lag since the previous scrape; starts a new scrape interval."""
        lag, self.max_since_scrape = self.max_since_scrape, 0.0
        return lag

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._due = self._clock() + self.interval_s
        self._handle = loop.call_at(loop.time() + self.interval_s, self._tick, loop)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        now = self._clock()
        self.observe(max(0.0, now - self._due))
        self._due = now + self.interval_s
        self._handle = loop.call_at(loop.time() + self.interval_s, self._tick, loop)

    def observe(self, lag: float) -> None:
        """Record one lag (seconds); warn when it is over the threshold and not rate-limited."""
        self.max_since_scrape = max(self.max_since_scrape, lag)
        self.max_ever = max(self.max_ever, lag)
        if lag < self.warn_after_s:
            return
        self.blocked += 1
        if self._on_blocked is not None:
            self._on_blocked()
        now = self._clock()
        if self._last_warning is not None and now - self._last_warning < self.warn_every_s:
            self._suppressed += 1
            return
        log.warning(
            "loop.blocked",
            lag_ms=round(lag * 1000, 1),
            threshold_ms=round(self.warn_after_s * 1000),
            suppressed=self._suppressed,
            reason="the event loop ran something this long: every group's requests waited",
        )
        self._last_warning = now
        self._suppressed = 0

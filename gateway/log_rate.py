"""Rate-limited warnings: a failure that repeats on every request (a full disk fails every
append) is logged at warning level at most once per interval per key, and the next line says
how many were suppressed meanwhile, so the log shows the failure without being flooded by it.

Not a Kafka behaviour (Kafka logs each failed append at error level); the events and their
fields are groupshift's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

WARN_EVERY_S = 10.0


class RateLimiter:
    """`allow(key)` -> None when the event is to be dropped, else how many of this key were
    dropped since the last one allowed."""

    def __init__(self, every_s: float = WARN_EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self._clock = clock
        self._last: dict[Hashable, float] = {}
        self._dropped: dict[Hashable, int] = {}

    def allow(self, key: Hashable) -> int | None:
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.every_s:
            self._dropped[key] = self._dropped.get(key, 0) + 1
            return None
        self._last[key] = now
        return self._dropped.pop(key, 0)

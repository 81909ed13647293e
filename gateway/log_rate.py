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

# Keys one limiter remembers. A key's state matters only for `every_s` after its last allowed
# event, so older keys are forgotten first; when that is not enough (more distinct keys within
# one interval, e.g. failed logins under made-up principals), new keys share one overflow key,
# so the log still says something is failing, once per interval, and memory stays bounded.
MAX_KEYS = 10_000
OVERFLOW = ("rate-limiter-overflow",)


class RateLimiter:
    """`allow(key)` -> None when the event is to be dropped, else how many of this key were
    dropped since the last one allowed. Remembers at most `max_keys` keys (`MAX_KEYS`)."""

    def __init__(
        self,
        every_s: float = WARN_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = MAX_KEYS,
    ) -> None:
        self.every_s = every_s
        self.max_keys = max_keys
        self._clock = clock
        self._last: dict[Hashable, float] = {}
        self._dropped: dict[Hashable, int] = {}
        self._pruned_at = float("-inf")

    def __len__(self) -> int:
        return len(self._last)

    def allow(self, key: Hashable) -> int | None:
        now = self._clock()
        last = self._last.get(key)
        if last is None and len(self._last) >= self.max_keys:
            self._prune(now)
            if len(self._last) >= self.max_keys:
                key = OVERFLOW
                last = self._last.get(key)
        if last is not None and now - last < self.every_s:
            self._dropped[key] = self._dropped.get(key, 0) + 1
            return None
        self._last[key] = now
        return self._dropped.pop(key, 0)

    def _prune(self, now: float) -> None:
        """Forget the keys last allowed an interval ago or more (what they suppressed since is
        not reported), at most once an interval: a flood of new keys costs one pass per interval,
        not one per event. The overflow key is kept while full."""
        if now - self._pruned_at < self.every_s:
            return
        self._pruned_at = now
        horizon = now - self.every_s
        keep = {k: t for k, t in self._last.items() if t > horizon or k is OVERFLOW}
        self._dropped = {k: n for k, n in self._dropped.items() if k in keep}
        self._last = keep

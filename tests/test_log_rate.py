"""`gateway.log_rate.RateLimiter`: at most one warning per key per interval, with the count
suppressed, and a bounded number of keys (`MAX_KEYS`): the audit limiter is keyed by the
principal a client claims, so failed logins under made-up names must not grow it without end."""

from __future__ import annotations

from gateway.audit import AuditLog
from gateway.log_rate import MAX_KEYS, RateLimiter
from gateway.registry import RequestContext


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_one_event_per_key_per_interval_with_the_count_suppressed() -> None:
    clock = Clock()
    limiter = RateLimiter(10.0, clock)
    assert limiter.allow("disk") == 0
    assert [limiter.allow("disk") for _ in range(3)] == [None, None, None]
    assert limiter.allow("other") == 0
    clock.now = 10.0
    assert limiter.allow("disk") == 3


def test_keys_older_than_the_interval_are_forgotten_when_the_table_is_full() -> None:
    clock = Clock()
    limiter = RateLimiter(10.0, clock, max_keys=100)
    for i in range(100):
        assert limiter.allow(("auth.failed", f"user-{i}", "10.0.0.1")) == 0
    clock.now = 11.0
    for i in range(100, 10_000):  # a new made-up principal per failed login, 10 s later
        limiter.allow(("auth.failed", f"user-{i}", "10.0.0.1"))
        assert len(limiter) <= 101
    # The first 100 keys were forgotten, the next ones filled the table: the rest share one key,
    # so the log still shows the failures, once per interval.
    assert limiter.allow(("auth.failed", "user-100", "10.0.0.1")) is None
    clock.now = 21.0
    assert limiter.allow(("auth.failed", "someone-new", "10.0.0.1")) == 0  # pruned again


def test_a_full_table_within_one_interval_shares_one_overflow_key() -> None:
    clock = Clock()
    limiter = RateLimiter(10.0, clock, max_keys=10)
    allowed = [limiter.allow(f"k{i}") for i in range(1000)]
    assert allowed[:10] == [0] * 10
    assert allowed[10] == 0 and allowed[11:] == [None] * 989  # one line for all the overflow
    assert len(limiter) == 11
    clock.now = 10.0  # an interval later the old keys are forgotten, the overflow key kept
    assert [limiter.allow(f"late{i}") for i in range(9)] == [0] * 9
    assert limiter.allow("late9") == 989  # the next overflow line counts what it dropped


def test_the_audit_log_stays_bounded_under_made_up_principals() -> None:
    audit = AuditLog()
    ctx = RequestContext("client", "/10.0.0.9", 1)
    for i in range(MAX_KEYS + 500):
        audit.auth_failed(ctx, mechanism="PLAIN", reason="bad password", principal=f"User:x{i}")
    assert len(audit._limiter) <= MAX_KEYS + 1

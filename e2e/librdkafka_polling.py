"""Reading with a librdkafka (confluent-kafka) consumer until enough records, an awaited error,
or a deadline: what the authorization tests ask of every consumer they start. A refused fetch or
group reaches the application as an error event from `poll`, named as Kafka names the error
(`KafkaError.name()`), so the tests compare names."""

from __future__ import annotations

import time
from typing import Any


def poll_records(
    consumer: Any,
    want: int,
    seconds: float,
    until: str | None = None,
    max_errors: int = 20,
    errors: list[str] | None = None,
) -> tuple[int, list[str]]:
    """(records read, error names seen) polling the subscribed `consumer` until `want` records,
    a fatal error, an error named `until`, more than `max_errors` errors, or `seconds`. `errors`
    may be a list an `error_cb` already appends to, so both kinds of report end up in one place.
    The consumer is not closed here."""
    seen = errors if errors is not None else []
    read = 0
    deadline = time.monotonic() + seconds
    while read < want and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is None:
            continue
        if m.error() is not None:
            seen.append(m.error().name())
            if m.error().fatal() or len(seen) > max_errors or seen[-1] == until:
                break
            continue
        read += 1
    return read, seen

"""What each Apache Kafka coordinator release does with each `__consumer_offsets` record kind when
it loads a partition: reads it, skips it, or fails the load.

These rules decide `groupshift check downgrade --to kafka-X.Y`. They come from the real loaders'
behaviour, each row pinned by a proof test that starts that Kafka release on a log containing the
record (docs/downgrade-rules.md lists the rows with their tests). Rows not yet proven are marked
`proven=False` and `check` reports them as such.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Outcome = Literal["read", "skipped", "fatal"]


@dataclass(frozen=True)
class Rule:
    target: str  # "kafka-3.7", "kafka-3.9", "kafka-4.0", ...
    record_type: int  # the coordinator record type (the key's version field)
    outcome: Outcome
    proven: bool  # True once a proof test pins the row
    note: str = ""


KAFKA_TARGETS: tuple[str, ...] = ("kafka-3.7", "kafka-3.9", "kafka-4.0")

RULES: tuple[Rule, ...] = ()


def outcome(target: str, record_type: int, value_version: int | None = None) -> Rule:
    """The rule for `record_type` (and value version, where a release treats versions differently)
    when `target` loads it. Raises KeyError for an unknown target."""
    if target not in KAFKA_TARGETS:
        raise KeyError(f"unknown downgrade target {target!r}; known: {', '.join(KAFKA_TARGETS)}")
    for rule in RULES:
        if rule.target == target and rule.record_type == record_type:
            return rule
    raise KeyError(f"no rule for record type {record_type} on {target}")

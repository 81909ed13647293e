"""groupshift's JSON event log (gateway/groups/events.py) read back, one event a line.

The gateway logs each group event of the coordinator (`member.joined`, `member.assignment_changed`
of a classic generation or of a KIP-848 reconciliation step, `group.converted`, ...) as one JSON
object; the rebalance health of `groupshift fleet` (tools.fleet.health) and the ownership plot of
`groupshift groups migration --events` (tools.groups.plot) both read it back. What one line
means does not depend on which view reads it, so the reading is here, once: the line as an
object, its time, its member, and its partition lists.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from typing import Any

#: The events after which a member owns nothing: it left, its session expired (fenced), or an
#: admin removed it.
MEMBER_ENDS = frozenset({"member.left", "member.fenced", "member.removed"})


def read_event(line: str) -> dict[str, Any] | None:
    """The JSON object of one log line; None for a line that is not one (a traceback, a plain
    log message), since the event log shares its stream with the gateway's other output."""
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def event_time(event: Mapping[str, Any]) -> float | None:
    """Seconds since the epoch of an event: its `timestamp` (or `ts`, `time`) as epoch seconds,
    epoch milliseconds (a number past 1e11: the gateway's numeric timestamps) or an ISO-8601
    string; None when it has none that reads, since an event without a time cannot be placed."""
    v = event.get("timestamp", event.get("ts", event.get("time")))
    if isinstance(v, int | float):
        return float(v) / (1000.0 if v > 1e11 else 1.0)
    if isinstance(v, str):
        try:
            return datetime.datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def event_member(event: Mapping[str, Any]) -> str:
    """The member id an event is about (`member`, or `member_id`); "" for a group event."""
    return str(event.get("member", event.get("member_id", "")))


def partition_names(value: Any) -> list[str] | None:
    """A partition list as "topic-partition" names: the gateway logs "topic-p" strings; a
    {topic: [partitions]} mapping and {topic, partition(s)} objects are read too, so logs
    written by other tools can be plotted. None when the event has no such list (the field is
    absent or not a list), which tells a reconciliation step from a whole assignment."""
    if isinstance(value, dict):
        return [f"{t}-{p}" for t, ps in value.items() for p in ps]
    if not isinstance(value, list):
        return None
    out: list[str] = []
    for item in value:
        if isinstance(item, dict) and "topic" in item:
            ps = item.get("partitions", [item.get("partition")])
            out += [f"{item['topic']}-{p}" for p in ps]
        else:
            out.append(str(item))
    return out

"""The migration story in the log: what the runtime adds to the engine's events before it logs them.

The engine returns its events as data (`Outcome.events`, name + fields) and knows only what the
request carried; an operator following a migration (KIP-848 "Supporting Online Consumer Group
Upgrade") needs more on a few lines, and everything it needs is in the shard's state right after
the operation, or in the operation's other events:

* `member.joined`: the member's client id, host, protocol (`classic` or `consumer`, as
  ConsumerGroupDescribe v1's `member_type`; `streams` or `classic` in a streams group, whose
  classic Kafka Streams instances are mid-roll) and assignor (the server assignor a KIP-848
  member asked for, or the group's default; the protocol names a classic member offered).
* `group.conversion_refused`: what the client was told, the error name of the `request.rejected`
  in the same outcome (Kafka answers a refused upgrade with GROUP_ID_NOT_FOUND), or `NONE` when
  the request itself succeeds (a refused downgrade leaves the group a consumer group).
* Conversions and refusals are logged at warning level: they change how every member of the group
  is served, or strand a client.

* `member.assignment_changed` for the members of a classic group of protocol type `consumer`,
  derived here (`ClassicAssignments`) when a generation's assignment is installed
  (`group.stable`): the classic engine stores each member's assignment as opaque bytes and
  overwrites them in place, so the runtime decodes the embedded consumer protocol and compares
  with the assignment it saw at the previous generation (after a restart the first generation
  reports everything as added).

Only outcomes that carry events reach this module; a steady heartbeat carries none, so the hot
path pays nothing.
"""

from __future__ import annotations

from typing import Any

from engine.classic.group import ClassicGroup
from engine.connect.group import ConnectGroup
from engine.consumer.group import ConsumerGroup
from engine.outcome import Event
from engine.shard import Shard
from engine.streams.group import StreamsGroup
from translation.embedded_protocol import SchemaError, parse_assignment

WARNING_EVENTS = frozenset({"group.converted", "group.conversion_refused", "append.failed"})
# Warning events that repeat with every request while their cause lasts (a full or failed disk):
# logged at most once per interval per shard, with the count suppressed (`gateway.log_rate`).
RATE_LIMITED_EVENTS = frozenset({"append.failed"})


def member_details(shard: Shard, group_id: str, member_id: str) -> dict[str, Any]:
    """client_id, client_host, protocol and assignor of a member, from the shard's state."""
    group = shard.groups.get(group_id)
    if isinstance(group, ConsumerGroup):
        m = group.members.get(member_id)
        if m is None:
            return {}
        if m.classic_member_metadata is not None:
            assignor: Any = [p.name for p in m.classic_member_metadata.supported_protocols]
            protocol = "classic"
        else:
            assignor = m.server_assignor or shard.config.consumer_assignors[0]
            protocol = "consumer"
        return {
            "client_id": m.client_id,
            "client_host": m.client_host,
            "protocol": protocol,
            "assignor": assignor,
        }
    if isinstance(group, ClassicGroup):
        c = group.members.get(member_id)
        if c is None:
            return {}
        return {
            "client_id": c.client_id,
            "client_host": c.client_host,
            "protocol": "classic",
            "assignor": [p.name for p in c.supported_protocols],
        }
    if isinstance(group, StreamsGroup):
        sm = group.members.get(member_id)
        if sm is None:
            return {}
        if sm.classic is not None:
            # A classic Kafka Streams instance inside the streams group (online migration).
            return {
                "client_id": sm.client_id,
                "client_host": sm.client_host,
                "protocol": "classic",
                "assignor": [p.name for p in sm.classic.supported_protocols],
            }
        return {"client_id": sm.client_id, "client_host": sm.client_host, "protocol": "streams"}
    if isinstance(group, ConnectGroup):
        w = group.members.get(member_id)
        if w is None:
            return {}
        return {"client_id": w.client_id, "client_host": w.client_host, "protocol": "connect", "url": w.url}
    return {}


def annotate(shard: Shard, events: list[Event] | tuple[Event, ...]) -> None:
    """Complete the events of one outcome in place (see the module docstring)."""
    told = "NONE"
    for name, fields in events:
        if name == "request.rejected":
            told = str(fields.get("error", "NONE"))
    for name, fields in events:
        if name == "member.joined":
            fields.update(member_details(shard, fields["group"], fields["member"]))
        elif name == "group.conversion_refused":
            fields["told"] = told


def _partition_key(name: str) -> tuple[str, int]:
    topic, _, p = name.rpartition("-")
    return topic, int(p)


class ClassicAssignments:
    """The last assignment each member of each classic consumer group received (one runtime)."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[str, frozenset[str]]] = {}

    def derive(self, shard: Shard, events: list[Event] | tuple[Event, ...]) -> list[Event]:
        out: list[Event] = []
        for name, fields in events:
            if name == "group.stable":
                out.extend(self._changes(shard, str(fields["group"])))
            elif name in ("group.converted", "group.deleted"):
                self._groups.pop(str(fields.get("group")), None)
        return out

    def _changes(self, shard: Shard, group_id: str) -> list[Event]:
        group = shard.groups.get(group_id)
        if not isinstance(group, ClassicGroup) or group.protocol_type != "consumer":
            return []
        before = self._groups.get(group_id, {})
        now: dict[str, frozenset[str]] = {}
        out: list[Event] = []
        for mid, member in group.members.items():
            try:
                parts = parse_assignment(member.assignment).partitions if member.assignment else ()
            except SchemaError:
                continue
            new = frozenset(f"{t}-{p}" for t, ps in parts for p in ps)
            now[mid] = new
            old = before.get(mid, frozenset())
            if new == old and mid in before:
                continue
            out.append(
                (
                    "member.assignment_changed",
                    {
                        "group": group_id,
                        "member": mid,
                        "protocol": "classic",
                        "generation": group.generation_id,
                        "added": sorted(new - old, key=_partition_key),
                        "revoked": sorted(old - new, key=_partition_key),
                        "assigned": sorted(new, key=_partition_key),
                    },
                )
            )
        self._groups[group_id] = now
        return out

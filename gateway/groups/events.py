"""The migration story in the log: what the runtime adds to the engine's events before it logs them.

The engine returns its events as data (`Outcome.events`, name + fields) and knows only what the
request carried; an operator following a migration (KIP-848 "Supporting Online Consumer Group
Upgrade") needs more on a few lines, and everything it needs is in the shard's state right after
the operation, or in the operation's other events:

* `member.joined`: the member's client id, host, protocol (`classic` or `consumer`, as
  ConsumerGroupDescribe v1's `member_type`) and assignor (the server assignor a KIP-848 member
  asked for, or the group's default; the protocol names a classic member offered).
* `group.conversion_refused`: what the client was told, the error name of the `request.rejected`
  in the same outcome (Kafka answers a refused upgrade with GROUP_ID_NOT_FOUND), or `NONE` when
  the request itself succeeds (a refused downgrade leaves the group a consumer group).
* Conversions and refusals are logged at warning level: they change how every member of the group
  is served, or strand a client.

Only outcomes that carry events reach this module; a steady heartbeat carries none, so the hot
path pays nothing.
"""

from __future__ import annotations

from typing import Any

from engine.classic.group import ClassicGroup
from engine.consumer.group import ConsumerGroup
from engine.outcome import Event
from engine.shard import Shard

WARNING_EVENTS = frozenset({"group.converted", "group.conversion_refused"})


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

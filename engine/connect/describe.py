"""Describing a Connect group through DescribeGroups (Kafka's classic shape: the Connect draft
defines no describe API). The group's state is one of `ConnectGroupState`; the protocol type is
`connect`, the protocol the chosen assignor; each worker is listed with its client id and host,
its URL and config offset as member metadata and its current connectors and tasks as member
assignment, both in the Connect-group wire shapes (docs/connect-groups.md, "Describe")."""

from __future__ import annotations

import struct

from engine.classic.api import DescribedGroup, DescribedGroupMember
from engine.connect.assignment import chosen_assignor
from engine.connect.group import ConnectGroup
from protocol.connect_wire import write_work

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def member_metadata(url: str, config_offset: int, member_epoch: int) -> bytes:
    """`MemberEpoch int32, ConfigOffset int64, Url (the rest, UTF-8)`."""
    return _I32.pack(member_epoch) + _I64.pack(config_offset) + url.encode()


def describe_as_classic(group: ConnectGroup) -> DescribedGroup:
    return DescribedGroup(
        group_id=group.group_id,
        group_state=group.state(),
        protocol_type="connect",
        protocol_data=chosen_assignor(group.members.values()) or "",
        members=tuple(
            DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=None,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=member_metadata(m.url, m.config_offset, m.member_epoch),
                member_assignment=write_work(m.assigned.wire()),
            )
            for m in group.members.values()
        ),
    )

"""Assignor inputs for tests: members with previous targets, plus the matching inverted map."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from engine.assignment import Assignment
from engine.assignors.base import GroupSpec, MemberSubscription, SubscriptionType
from engine.metadata import TopicId

FOO = uuid.UUID("00000000-0000-4000-8000-00000000f000")
BAR = uuid.UUID("00000000-0000-4000-8000-00000000ba00")
BAZ = uuid.UUID("00000000-0000-4000-8000-00000000ba20")


@dataclass(frozen=True)
class Member:
    member_id: str
    topics: Iterable[TopicId] = (FOO,)
    previous: Mapping[TopicId, Sequence[int]] = field(default_factory=dict)
    instance_id: str | None = None


def group(
    *members: Member,
    kind: SubscriptionType | None = None,
    inverted: Mapping[TopicId, Mapping[int, str]] | None = None,
) -> GroupSpec:
    """A spec with members in the given (join) order and, unless given, the inverted target
    of their previous targets. `kind` defaults to what the subscriptions are."""
    subs = {
        m.member_id: MemberSubscription(
            m.member_id,
            m.instance_id,
            None,
            frozenset(m.topics),
            {t: tuple(p) for t, p in m.previous.items()},
        )
        for m in members
    }
    if kind is None:
        distinct = {s.subscribed_topic_ids for s in subs.values()}
        homogeneous = len(distinct) <= 1
        kind = SubscriptionType.HOMOGENEOUS if homogeneous else SubscriptionType.HETEROGENEOUS
    if inverted is None:
        inverted = invert({mid: s.assignment for mid, s in subs.items()})
    return GroupSpec(subs, kind, inverted)


def invert(targets: Mapping[str, Assignment]) -> dict[TopicId, dict[int, str]]:
    out: dict[TopicId, dict[int, str]] = {}
    for member_id, assignment in targets.items():
        for topic_id, parts in assignment.items():
            for p in parts:
                out.setdefault(topic_id, {})[p] = member_id
    return out


def lists(result: Mapping[str, Assignment], topic_id: TopicId = FOO) -> dict[str, list[int]]:
    """`member -> partitions of one topic`, in the order the assignor gave them."""
    return {member_id: list(a.get(topic_id, ())) for member_id, a in result.items()}

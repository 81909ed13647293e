"""PLACEHOLDER range assignor (replaced by the full implementation on the assignors branch)."""

from __future__ import annotations

from engine.assignment import Assignment
from engine.assignors.base import GroupSpec, PartitionAssignorError, TopicDescriber


class RangeAssignor:
    name = "range"

    def assign(self, spec: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
        members = list(spec.members.values())
        members.sort(key=lambda m: (m.instance_id is None, m.instance_id or "", m.member_id))
        out: dict[str, dict] = {m.member_id: {} for m in spec.members.values()}
        all_topics = sorted({t for m in members for t in m.subscribed_topic_ids})
        for t in all_topics:
            n = topics.num_partitions(t)
            if n < 0:
                raise PartitionAssignorError(f"topic {t} missing")
            subs = [m for m in members if t in m.subscribed_topic_ids]
            q, extra = divmod(n, len(subs))
            nxt = 0
            for m in subs:
                k = q + (1 if extra > 0 else 0)
                extra -= 1 if extra > 0 else 0
                if k:
                    out[m.member_id][t] = tuple(range(nxt, nxt + k))
                nxt += k
        result: dict[str, Assignment] = {}
        for m in spec.members.values():
            result[m.member_id] = m.assignment if out[m.member_id] == m.assignment else out[m.member_id]
        return result

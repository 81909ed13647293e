"""PLACEHOLDER uniform assignor (replaced by the full implementation on the assignors branch)."""

from __future__ import annotations

from engine.assignment import Assignment
from engine.assignors.base import GroupSpec, PartitionAssignorError, TopicDescriber


class UniformAssignor:
    name = "uniform"

    def assign(self, spec: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
        members = list(spec.members.values())
        if not members:
            return {}
        all_topics: list = []
        for m in members:
            for t in sorted(m.subscribed_topic_ids):
                if t not in all_topics:
                    all_topics.append(t)
        total = 0
        unassigned: list[tuple] = []
        for t in all_topics:
            n = topics.num_partitions(t)
            if n < 0:
                raise PartitionAssignorError(f"topic {t} missing")
            total += n
            unassigned.extend((t, p) for p in range(n) if not spec.is_partition_assigned(t, p))
        quota, extra = divmod(total, len(members))
        out: dict[str, Assignment] = {}
        room: list[tuple[str, int, set]] = []
        for m in members:
            q = quota + (1 if extra > 0 else 0)
            extra -= 1 if extra > 0 else 0
            new: dict = {}
            for t, parts in m.assignment.items():
                if t not in m.subscribed_topic_ids:
                    unassigned.extend((t, p) for p in parts if topics.num_partitions(t) > p)
                    continue
                keep = parts[:q]
                q -= len(keep)
                unassigned.extend((t, p) for p in parts[len(keep):])
                if keep:
                    new[t] = keep
            out[m.member_id] = new
            room.append((m.member_id, q, m.subscribed_topic_ids))
        for mid, q, subs in room:
            tgt = dict(out[mid])
            i = 0
            while q > 0 and i < len(unassigned):
                t, p = unassigned[i]
                if t in subs:
                    tgt[t] = (*tgt.get(t, ()), p)
                    unassigned.pop(i)
                    q -= 1
                else:
                    i += 1
            out[mid] = tgt
        for m in members:
            if out[m.member_id] == m.assignment:
                out[m.member_id] = m.assignment
        return out

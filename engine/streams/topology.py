"""A topology configured against the cluster's topics (Kafka 4.4 `streams/topics/`:
`InternalTopicManager.configureTopics`, `RepartitionTopics`, `CopartitionedTopicsEnforcer`,
`ConfiguredTopology`).

What the coordinator works out from the topology a member sent and the metadata image:
* every source topic must exist (a source regex must match at least one topic), else the group
  reports MISSING_SOURCE_TOPICS and assigns nothing;
* a repartition topic without a fixed partition count gets the largest partition count of the
  topics read by the subtopologies that write to it, repeated until nothing changes (a
  repartition topic may feed another);
* topics of a copartition group must have equal partition counts: derived repartition topics
  take the count of the group's source topics, and source topics that differ give
  INCORRECTLY_PARTITIONED_TOPICS;
* a subtopology has one task per partition of its largest input topic; its changelog topics
  have that many partitions;
* internal topics that do not exist are returned for creation (MISSING_INTERNAL_TOPICS until
  they appear); existing ones with another partition count give INCORRECTLY_PARTITIONED_TOPICS.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from engine.metadata import MetadataImage
from engine.streams.api import (
    INCORRECTLY_PARTITIONED_TOPICS,
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
    InternalTopic,
    Status,
)
from records.streams_group import StreamsGroupTopologyValue, Subtopology


@dataclass(frozen=True, slots=True)
class ConfiguredTopology:
    """`tasks` (subtopology id -> number of tasks) is None when the topology cannot run yet;
    `statuses` says why; `to_create` lists the internal topics the cluster lacks."""

    tasks: dict[str, int] | None
    statuses: tuple[Status, ...]
    to_create: tuple[InternalTopic, ...]
    metadata_hash: int
    # Internal topic name -> its partition count, once the topology is ready (StreamsGroupDescribe
    # shows these counts in place of the topology's undefined ones, as Kafka does).
    partitions: dict[str, int] | None = None
    # Why the topology cannot be configured at all (Kafka's STREAMS_INVALID_TOPOLOGY answer).
    error: str | None = None


def java_hash_order(
    names: Iterable[str], initial_capacity: int | None = None, *, compute_if_absent: bool = False
) -> list[str]:
    """`names` in the order a Java `HashMap`/`HashSet` of them iterates (the order Kafka's status
    details list topics in): by bucket of `String.hashCode` spread as HashMap does, insertion order
    within a bucket. The table is the one Java's `HashMap` ends with after inserting `names` in
    order: `new HashMap<>()` (16 buckets) or `new HashMap<>(initial_capacity)` (the next power of
    two), doubled when the size passes 0.75 of it. `put` appends to its bucket and doubles right
    after the insertion that passes the threshold; `computeIfAbsent` puts the new node first in
    its bucket and doubles only before the next insertion (so its last one never does). A
    doubling keeps the order within each bucket. Tree bins (8 names in one bucket of a table of
    64 or more) are not modelled."""
    unique = list(dict.fromkeys(names))
    capacity = _java_hash_map_capacity(len(unique), initial_capacity, compute_if_absent)

    def bucket(name: str) -> int:
        h = 0
        for unit in name.encode("utf-16-be").hex(" ", 2).split():
            h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    if compute_if_absent:
        return [n for _, n in sorted(enumerate(unique), key=lambda x: (bucket(x[1]), -x[0]))]
    return sorted(unique, key=bucket)


def _java_hash_map_capacity(size: int, initial_capacity: int | None, compute_if_absent: bool) -> int:
    """The table length of a Java `HashMap` after `size` insertions of new keys
    (JDK 17-25 `HashMap.resize`, `tableSizeFor`, `putVal`, `computeIfAbsent`)."""
    capacity = 0
    if initial_capacity is None:
        threshold = 0
    else:
        threshold = 1 << max(0, initial_capacity - 1).bit_length()  # tableSizeFor

    def resize(cap: int, thr: int) -> tuple[int, int]:
        if cap > 0:
            new_cap = cap * 2
            return new_cap, (thr * 2 if cap >= 16 else int(new_cap * 0.75))
        if thr > 0:
            return thr, int(thr * 0.75)
        return 16, 12

    for inserted in range(size):
        if compute_if_absent:
            if capacity == 0 or inserted > threshold:
                capacity, threshold = resize(capacity, threshold)
        else:
            if capacity == 0:
                capacity, threshold = resize(capacity, threshold)
            if inserted + 1 > threshold:
                capacity, threshold = resize(capacity, threshold)
    return max(capacity, 1)


def _source_names(sub: Subtopology, image: MetadataImage) -> list[str]:
    names = list(sub.source_topics)
    for pattern in sub.source_topic_regex:
        try:
            compiled = re.compile(pattern)
        except re.error:
            continue
        names += sorted(n for n in image.topic_names() if compiled.fullmatch(n))
    return names


def metadata_hash(names: set[str], image: MetadataImage) -> int:
    """A hash of the topics the topology reads and writes, as they are in the image (name, id,
    partitions): a change of any of them bumps the group epoch, as Kafka's `MetadataHash`
    does. The function differs from Kafka's (docs/deviations.md); only equality matters."""
    h = hashlib.blake2b(digest_size=8)
    for name in sorted(names):
        t = image.topic(name)
        if t is not None:
            h.update(f"{name}\0{t.topic_id}\0{t.num_partitions}\0".encode())
    return int.from_bytes(h.digest(), "big", signed=True)


def configure(topology: StreamsGroupTopologyValue, image: MetadataImage) -> ConfiguredTopology:
    subs = topology.subtopologies
    statuses: list[Status] = []
    involved: set[str] = set()
    sources: dict[str, list[str]] = {}
    missing_sources: list[str] = []
    for sub in subs:
        names = _source_names(sub, image)
        sources[sub.subtopology_id] = names
        involved.update(names)
        missing_sources += [n for n in sub.source_topics if image.topic(n) is None]
        missing_sources += [
            p
            for p in sub.source_topic_regex
            if not _source_names(Subtopology("", (), (p,), (), (), (), ()), image)
        ]
    for sub in subs:
        for info in (*sub.repartition_source_topics, *sub.state_changelog_topics):
            involved.add(info.name)
    digest = metadata_hash(involved, image)
    if missing_sources:
        detail = f"Source topics {', '.join(java_hash_order(missing_sources))} are missing."
        return ConfiguredTopology(None, (Status(MISSING_SOURCE_TOPICS, detail),), (), digest)

    # Partition counts of the repartition topics: fixed, or derived from the writers' inputs.
    counts: dict[str, int] = {}
    for sub in subs:
        for info in sub.repartition_source_topics:
            if info.partitions > 0:
                counts[info.name] = info.partitions

    def source_count(name: str) -> int | None:
        t = image.topic(name)
        return None if t is None else t.num_partitions

    def input_counts(sub: Subtopology) -> list[int]:
        out = [c for n in sources[sub.subtopology_id] if (c := source_count(n)) is not None]
        out += [counts[i.name] for i in sub.repartition_source_topics if i.name in counts]
        return out

    changed = True
    while changed:
        changed = False
        for sub in subs:
            for info in sub.repartition_source_topics:
                if info.partitions > 0:
                    continue
                writers = [w for w in subs if info.name in w.repartition_sink_topics]
                found = [c for w in writers for c in input_counts(w)]
                if found and max(found) > counts.get(info.name, 0):
                    counts[info.name] = max(found)
                    changed = True

    # Kafka 4.4 (measured): a repartition source topic without a fixed count that no subtopology
    # writes cannot get a count, and the heartbeat fails with STREAMS_INVALID_TOPOLOGY.
    for sub in subs:
        for info in sub.repartition_source_topics:
            if info.partitions <= 0 and not any(info.name in w.repartition_sink_topics for w in subs):
                return ConfiguredTopology(
                    None,
                    (),
                    (),
                    digest,
                    error="Failed to compute number of partitions for all repartition topics, because a "
                    "repartition source topic is never used as a sink topic.",
                )

    # Copartition groups.
    for sub in subs:
        names = sources[sub.subtopology_id]
        for group in sub.copartition_groups:
            # Indexes come from a record (a heartbeat's are validated): one out of range, a
            # negative one included, names nothing.
            group_sources = [
                sub.source_topics[i] for i in group.source_topics if 0 <= i < len(sub.source_topics)
            ]
            group_sources += [names[i] for i in group.source_topic_regex if 0 <= i < len(names)]
            partitioned = {c for n in group_sources if (c := source_count(n)) is not None}
            if len(partitioned) > 1:
                counts_text = ", ".join(f"{n}={source_count(n)}" for n in sorted(set(group_sources)))
                detail = f"Following topics do not have the same number of partitions: [{{{counts_text}}}]"
                statuses.append(Status(INCORRECTLY_PARTITIONED_TOPICS, detail))
                continue
            repartition = [
                sub.repartition_source_topics[i]
                for i in group.repartition_source_topics
                if 0 <= i < len(sub.repartition_source_topics)
            ]
            target = (
                next(iter(partitioned))
                if partitioned
                else max((counts.get(r.name, 0) for r in repartition), default=0)
            )
            for r in repartition:
                if r.partitions <= 0 and target > 0:
                    counts[r.name] = target
    if statuses:
        return ConfiguredTopology(None, tuple(statuses), (), digest)

    def actual_input_counts(sub: Subtopology) -> list[int]:
        """A subtopology's inputs as they are: an existing repartition topic counts with its
        partitions, whatever the topology asks for (Kafka 4.4 measured: its changelog is then
        expected with that many partitions)."""
        out = [c for n in sources[sub.subtopology_id] if (c := source_count(n)) is not None]
        for i in sub.repartition_source_topics:
            existing = source_count(i.name)
            if existing is not None:
                out.append(existing)
            elif i.name in counts:
                out.append(counts[i.name])
        return out

    tasks: dict[str, int] = {}
    for sub in subs:
        found = actual_input_counts(sub)
        if not found:
            detail = f"Subtopology {sub.subtopology_id}: the partition count of its inputs cannot be derived."
            return ConfiguredTopology(None, (Status(MISSING_SOURCE_TOPICS, detail),), (), digest)
        tasks[sub.subtopology_id] = max(found)

    to_create: list[InternalTopic] = []
    wrong: dict[str, str] = {}
    # Repartition topics, then changelog topics: the insertion order of Kafka's hash map of
    # internal topics, which decides the order of two names in one bucket (measured).
    expected = [(i, counts[i.name]) for sub in subs for i in sub.repartition_source_topics]
    expected += [(i, tasks[sub.subtopology_id]) for sub in subs for i in sub.state_changelog_topics]
    for info, n in expected:
        t = image.topic(info.name)
        if t is None:
            to_create.append(InternalTopic(info.name, n, info.replication_factor, info.topic_configs))
        elif t.num_partitions != n:
            wrong[info.name] = (
                f"Existing topic {info.name} has different number of partitions: "
                f"expected {n}, found {t.num_partitions}"
            )
    if wrong:
        # Kafka 4.4 stops at the first such topic of its hash map of internal topics (measured:
        # the changelog or the repartition topic, by their names' hashes).
        first = wrong[java_hash_order(wrong)[0]]
        return ConfiguredTopology(None, (Status(INCORRECTLY_PARTITIONED_TOPICS, first),), (), digest)
    if to_create:
        missing = ", ".join(java_hash_order(t.name for t in to_create))
        detail = f"Internal topics are missing: {missing}"
        return ConfiguredTopology(None, (Status(MISSING_INTERNAL_TOPICS, detail),), tuple(to_create), digest)
    partitions = {i.name: counts[i.name] for sub in subs for i in sub.repartition_source_topics}
    partitions.update({i.name: tasks[sub.subtopology_id] for sub in subs for i in sub.state_changelog_topics})
    return ConfiguredTopology(tasks, (), (), digest, partitions)

"""Microbenchmark of the coordinator record codec: µs per record to encode and to decode.

The replay path decodes every record of a shard's log (goal: a million records in a few
seconds, decoding included), so each type is timed on a record of typical size. Decoding the
same bytes again keeps everything warm, so the "distinct" row also decodes 50,000 member
assignments that all differ, once each (object churn and garbage collection included).

    .venv/bin/python -m bench.record_codec [--json]
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import timeit
import uuid

from records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    CoordinatorRecord,
    GroupMemberMetadata,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    TopicMetadata,
    TopicPartitions,
)
from records.codec import decode_record, encode_record

GROUP = "payments-service-consumers"
MEMBER = "consumer-payments-1-4f0c7d51-7b8e-4bd3-9f5e-2a4a3f7c1d20"
TOPICS = [uuid.UUID(int=0x1234_5678_9ABC_DEF0 + i) for i in range(3)]


def sample_records() -> dict[str, CoordinatorRecord]:
    """One record per type, sized like a real group's (3 topics, a few partitions each)."""
    assigned = tuple(TopicPartitions(t, (0, 3, 6, 9)) for t in TOPICS)
    # What groupshift writes in k8 (Kafka 4.3+): each partition's assignment epoch too.
    with_epochs = tuple(TopicPartitions(t, (0, 3, 6, 9), (40, 40, 42, 42)) for t in TOPICS)
    return {
        "k1 OffsetCommit v3": CoordinatorRecord(
            OffsetCommitKey(GROUP, "payments.events", 17),
            OffsetCommitValue(123_456_789, 12, "", 1_700_000_000_000),
        ),
        "k1 OffsetCommit v1": CoordinatorRecord(
            OffsetCommitKey(GROUP, "payments.events", 17),
            OffsetCommitValue(123_456_789, -1, "", 1_700_000_000_000, 1_700_086_400_000),
        ),
        "k1 OffsetCommit tombstone": CoordinatorRecord(OffsetCommitKey(GROUP, "payments.events", 17), None),
        "k2 GroupMetadata v3 (3 members)": CoordinatorRecord(
            GroupMetadataKey(GROUP),
            GroupMetadataValue(
                "consumer",
                7,
                "range",
                MEMBER,
                1_700_000_000_000,
                tuple(
                    GroupMemberMetadata(
                        f"{MEMBER}-{i}",
                        None,
                        "consumer-payments-1",
                        "/10.0.0.7",
                        300_000,
                        45_000,
                        b"\x00\x03" + bytes(60),
                        b"\x00\x03" + bytes(40),
                    )
                    for i in range(3)
                ),
            ),
        ),
        "k3 ConsumerGroupMetadata": CoordinatorRecord(
            ConsumerGroupMetadataKey(GROUP), ConsumerGroupMetadataValue(42)
        ),
        "k4 PartitionMetadata (3 topics)": CoordinatorRecord(
            ConsumerGroupPartitionMetadataKey(GROUP),
            ConsumerGroupPartitionMetadataValue(
                tuple(TopicMetadata(t, f"payments.topic-{i}", 12) for i, t in enumerate(TOPICS))
            ),
        ),
        "k5 MemberMetadata": CoordinatorRecord(
            ConsumerGroupMemberMetadataKey(GROUP, MEMBER),
            ConsumerGroupMemberMetadataValue(
                None,
                "eu-west-1a",
                "consumer-payments-1",
                "/10.0.0.7",
                ("payments.events", "payments.refunds"),
                None,
                300_000,
                "uniform",
            ),
        ),
        "k5 MemberMetadata classic": CoordinatorRecord(
            ConsumerGroupMemberMetadataKey(GROUP, MEMBER),
            ConsumerGroupMemberMetadataValue(
                None,
                None,
                "consumer-payments-1",
                "/10.0.0.7",
                ("payments.events",),
                None,
                300_000,
                None,
                ClassicMemberMetadata(45_000, (ClassicProtocol("range", bytes(40)),)),
            ),
        ),
        "k6 TargetAssignmentMetadata": CoordinatorRecord(
            ConsumerGroupTargetAssignmentMetadataKey(GROUP),
            ConsumerGroupTargetAssignmentMetadataValue(42),
        ),
        "k7 TargetAssignmentMember (3x4)": CoordinatorRecord(
            ConsumerGroupTargetAssignmentMemberKey(GROUP, MEMBER),
            ConsumerGroupTargetAssignmentMemberValue(assigned),
        ),
        "k8 CurrentMemberAssignment (3x4)": CoordinatorRecord(
            ConsumerGroupCurrentMemberAssignmentKey(GROUP, MEMBER),
            ConsumerGroupCurrentMemberAssignmentValue(42, 41, 0, with_epochs, ()),
        ),
        "k8 CurrentMemberAssignment (3x4, no epochs: Kafka <= 4.2)": CoordinatorRecord(
            ConsumerGroupCurrentMemberAssignmentKey(GROUP, MEMBER),
            ConsumerGroupCurrentMemberAssignmentValue(42, 41, 0, assigned, ()),
        ),
        "k8 CurrentMemberAssignment tombstone": CoordinatorRecord(
            ConsumerGroupCurrentMemberAssignmentKey(GROUP, MEMBER), None
        ),
        "k16 RegularExpression": CoordinatorRecord(
            ConsumerGroupRegularExpressionKey(GROUP, "payments\\..*"),
            ConsumerGroupRegularExpressionValue(
                ("payments.events", "payments.refunds"), 1234, 1_700_000_000_000
            ),
        ),
    }


def measure(number: int = 50_000, repeat: int = 5) -> dict[str, dict[str, float]]:
    results = {}
    for name, record in sample_records().items():
        key, value = encode_record(record)
        assert decode_record(key, value) == record, name
        enc = min(timeit.repeat(functools.partial(encode_record, record), number=number, repeat=repeat))
        dec = min(timeit.repeat(functools.partial(decode_record, key, value), number=number, repeat=repeat))
        results[name] = {
            "encode_us": enc / number * 1e6,
            "decode_us": dec / number * 1e6,
            "bytes": len(key) + len(value or b""),
        }
    return results


def measure_distinct_assignments(count: int = 50_000) -> dict[str, float]:
    """k8 records whose partition lists all differ: one decode each, no topic-partitions hit."""
    encoded = [
        encode_record(
            CoordinatorRecord(
                ConsumerGroupCurrentMemberAssignmentKey(GROUP, MEMBER),
                ConsumerGroupCurrentMemberAssignmentValue(
                    42,
                    41,
                    0,
                    tuple(TopicPartitions(t, (i, i + 1, i + 2, i + 3), (41, 41, 42, 42)) for t in TOPICS),
                    (),
                ),
            )
        )
        for i in range(count)
    ]
    start = timeit.default_timer()
    for key, value in encoded:
        decode_record(key, value)
    elapsed = timeit.default_timer() - start
    return {
        "encode_us": float("nan"),
        "decode_us": elapsed / count * 1e6,
        "bytes": len(encoded[0][0]) + len(encoded[0][1] or b""),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--number", type=int, default=50_000)
    args = parser.parse_args()
    results = measure(args.number)
    results["k8 CurrentMemberAssignment distinct"] = measure_distinct_assignments()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'record':40s} {'bytes':>6s} {'encode µs':>10s} {'decode µs':>10s}")
    for name, r in results.items():
        untimed = math.isnan(r["encode_us"])
        encode = "-" if untimed else f"{r['encode_us']:.2f}"
        print(f"{name:40s} {r['bytes']:6d} {encode:>10s} {r['decode_us']:10.2f}")


if __name__ == "__main__":
    main()

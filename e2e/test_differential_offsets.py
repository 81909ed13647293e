"""Differential: OffsetCommit, OffsetFetch and OffsetDelete on both group types against a real Apache
Kafka 4.x node and groupshift with the same settings (Kafka's `OffsetMetadataManager` and the
per-group commit validation of `ClassicGroup.validateOffsetCommit` and
`ConsumerGroup.validateOffsetCommit`): simple commits (generation -1, empty member id), classic
generation checks, consumer group member epochs (STALE_MEMBER_EPOCH, the v8/v9 split of KIP-848),
unknown topics, metadata size, OffsetFetch across versions (batched groups on v8+, require_stable)
and OffsetDelete (GROUP_SUBSCRIBED_TO_TOPIC, GROUP_ID_NOT_FOUND).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from e2e.differential import Session, compare, plain, run_both
from e2e.differential_classic import (
    client,
    coordinator_loaded,
    in_thread,
    join,
    member_id,
    raw_on,
    sync,
    wait_state,
)
from e2e.diffgroups import cgh as diff_cgh
from e2e.diffgroups import new_member_id, owned_of, wait_visible_to_groups

pytestmark = pytest.mark.e2e


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0 bytes: the topics a classic member subscribes to (what
    OffsetDelete reads to answer GROUP_SUBSCRIBED_TO_TOPIC)."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def partitions(*pairs: tuple[int, int], metadata: str | None = None) -> list[dict[str, Any]]:
    return [
        {
            "partition_index": p,
            "committed_offset": o,
            "committed_leader_epoch": -1,
            "commit_timestamp": -1,
            "committed_metadata": metadata,
        }
        for p, o in pairs
    ]


def commit(
    s: Session,
    version: int,
    topics: list[dict[str, Any]],
    gen: int = -1,
    mid: str = "",
    group: str | None = None,
    c: Any = None,
    **over: Any,
) -> Any:
    fields: dict[str, Any] = {
        "group_id": group or s.group(),
        "generation_id_or_member_epoch": gen,
        "member_id": mid,
        "group_instance_id": None,
        "retention_time": -1,
        "topics": topics,
    }
    fields.update(over)
    return raw_on(c or s.client, 8, version, **fields)


def fetch(
    s: Session,
    version: int,
    topics: list[dict[str, Any]] | None,
    group: str | None = None,
    **over: Any,
) -> Any:
    if version >= 8:
        fields: dict[str, Any] = {
            "groups": [
                {
                    "group_id": group or s.group(),
                    "member_id": over.pop("member_id", None),
                    "member_epoch": over.pop("member_epoch", -1),
                    "topics": topics,
                }
            ],
            "require_stable": False,
        }
    else:
        fields = {"group_id": group or s.group(), "topics": topics, "require_stable": False}
    fields.update(over)
    return s.raw(9, version, **fields)


def topic(s: Session, *parts: int, name: str = "t") -> dict[str, Any]:
    return {"name": s.topic(name), "partition_indexes": list(parts)}


def cgh(s: Session, c: Any = None, **over: Any) -> Any:
    fields: dict[str, Any] = {
        "group_id": s.group(),
        "member_id": str(uuid.uuid4()),
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": 30000,
        "subscribed_topic_names": [s.topic()],
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [],
    }
    fields.update(over)
    return raw_on(c or s.client, 68, 1, **fields)


def classic_member(s: Session, *topics: str, protocol_type: str = "consumer") -> tuple[str, int]:
    """One stable classic member subscribed to `topics`: (member id, generation)."""
    protocols = [{"name": "range", "metadata": subscription(*topics)}]
    mid = member_id(s, protocols=protocols, protocol_type=protocol_type)
    r = join(s, member_id=mid, protocols=protocols, protocol_type=protocol_type)
    s.note("JoinGroup", {"error_code": r.error_code, "generation_id": r.generation_id})
    s.note("SyncGroup", sync(s, r.generation_id, mid, protocol_type=protocol_type).error_code)
    return mid, int(r.generation_id)


def setup(s: Session, partitions_: int = 2) -> None:
    s.create_topic(s.topic(), partitions_)
    coordinator_loaded(s, *(s.group(n) for n in ("g", "a", "b", "c")))


# -- scenarios --------------------------------------------------------------------------------------


def scenario_simple_commit_fetch_across_versions(s: Session) -> None:
    """Generation -1 commits (no group membership) on every version Kafka 4.x serves, each read
    back on every OffsetFetch version."""
    setup(s)
    for version in range(2, 10):
        t = [
            {"name": s.topic(), "partitions": partitions((version % 2, 10 + version), metadata=f"v{version}")}
        ]
        s.note(f"OffsetCommit v{version}", commit(s, version, t))
        for fv in (1, 5, 7, 8, 9):
            s.note(f"OffsetFetch v{fv} after v{version}", fetch(s, fv, [topic(s, 0, 1)]))


def scenario_fetch_all_topics_and_unknown(s: Session) -> None:
    setup(s)
    s.note("OffsetFetch(unknown group)", fetch(s, 9, [topic(s, 0)]))
    s.note("OffsetFetch(unknown group, all topics)", fetch(s, 9, None))
    commit(s, 9, [{"name": s.topic(), "partitions": partitions((0, 7), (1, 8))}])
    s.note("OffsetFetch v2 all topics", fetch(s, 2, None))
    s.note("OffsetFetch v9 all topics", fetch(s, 9, None))
    s.note("OffsetFetch v9 unknown partition", fetch(s, 9, [topic(s, 5)]))
    s.note("OffsetFetch v9 unknown topic", fetch(s, 9, [topic(s, 0, name="nope")]))
    s.note("OffsetFetch v7 require_stable", fetch(s, 7, [topic(s, 0, 1)], require_stable=True))
    s.note("OffsetFetch v9 require_stable", fetch(s, 9, [topic(s, 0, 1)], require_stable=True))


def scenario_fetch_batched_groups(s: Session) -> None:
    """OffsetFetch v8+ asks for several groups at once; each answers on its own."""
    setup(s)
    commit(s, 9, [{"name": s.topic(), "partitions": partitions((0, 3))}], group=s.group("a"))
    commit(s, 9, [{"name": s.topic(), "partitions": partitions((1, 4))}], group=s.group("b"))
    for v in (8, 9):
        r = plain(
            s.raw(
                9,
                v,
                groups=[
                    {
                        "group_id": s.group("a"),
                        "member_id": None,
                        "member_epoch": -1,
                        "topics": [topic(s, 0, 1)],
                    },
                    {"group_id": s.group("b"), "member_id": None, "member_epoch": -1, "topics": None},
                    {"group_id": s.group("c"), "member_id": None, "member_epoch": -1, "topics": None},
                ],
                require_stable=False,
            )
        )
        r["groups"].sort(key=lambda g: g["group_id"])  # Kafka: coordinator partition order
        s.note(f"OffsetFetch v{v}", r)


def scenario_commit_unknown_topic_and_partition(s: Session) -> None:
    """Kafka answers UNKNOWN_TOPIC_OR_PARTITION for a topic or partition its metadata lacks."""
    setup(s)
    s.note(
        "OffsetCommit(unknown topic)",
        commit(s, 9, [{"name": s.topic("missing"), "partitions": partitions((0, 1))}]),
    )
    s.note(
        "OffsetCommit(unknown partition)",
        commit(s, 9, [{"name": s.topic(), "partitions": partitions((0, 1), (7, 1))}]),
    )
    s.note("OffsetFetch", fetch(s, 9, [topic(s, 0, 7), topic(s, 0, name="missing")]))


def scenario_commit_metadata_too_large(s: Session) -> None:
    setup(s)
    s.note(
        "OffsetCommit(4097 bytes of metadata)",
        commit(s, 9, [{"name": s.topic(), "partitions": partitions((0, 1), metadata="m" * 4097)}]),
    )
    s.note(
        "OffsetCommit(4096 bytes of metadata)",
        commit(s, 9, [{"name": s.topic(), "partitions": partitions((1, 1), metadata="m" * 4096)}]),
    )
    s.note("OffsetFetch", fetch(s, 9, [topic(s, 0, 1)]))


def scenario_commit_classic_generation_checks(s: Session) -> None:
    setup(s)
    mid, gen = classic_member(s, s.topic())
    t = [{"name": s.topic(), "partitions": partitions((0, 42))}]
    for v in (2, 5, 8, 9):
        s.note(f"OffsetCommit v{v}", commit(s, v, t, gen, mid))
    s.note("OffsetCommit(wrong generation)", commit(s, 9, t, gen + 1, mid))
    s.note("OffsetCommit(old generation)", commit(s, 9, t, gen - 1, mid))
    s.note("OffsetCommit(unknown member)", commit(s, 9, t, gen, "nobody"))
    s.note("OffsetCommit(simple, non-empty group)", commit(s, 9, t))
    s.note("OffsetCommit(-1, member id)", commit(s, 9, t, -1, mid))
    s.note("OffsetCommit(unknown instance)", commit(s, 9, t, gen, mid, group_instance_id="i-1"))
    s.note("OffsetFetch v9 with member", fetch(s, 9, [topic(s, 0)], member_id=mid, member_epoch=gen))
    s.note(
        "OffsetFetch v9 with stale member", fetch(s, 9, [topic(s, 0)], member_id=mid, member_epoch=gen + 4)
    )


def scenario_commit_generation_to_new_or_empty_group(s: Session) -> None:
    """A commit with a generation to a group that does not exist, and to an empty classic group."""
    setup(s)
    t = [{"name": s.topic(), "partitions": partitions((0, 1))}]
    s.note("OffsetCommit(generation 3, no group)", commit(s, 9, t, 3, "ghost"))
    s.note("OffsetCommit v5(generation 3, no group)", commit(s, 5, t, 3, "ghost"))
    mid, gen = classic_member(s, s.topic())
    s.note(
        "LeaveGroup",
        raw_on(
            s.client,
            13,
            5,
            group_id=s.group(),
            members=[{"member_id": mid, "group_instance_id": None, "reason": None}],
        ),
    )
    s.note("OffsetCommit(left member)", commit(s, 9, t, gen, mid))
    s.note("OffsetCommit(simple, empty group)", commit(s, 9, t))


def scenario_commit_consumer_group_epochs(s: Session) -> None:
    """KIP-848: a consumer group member commits with its member epoch (v9+); another epoch is
    STALE_MEMBER_EPOCH; v8 and older cannot commit for a member of a consumer group."""
    setup(s)
    mid = str(uuid.uuid4())
    r = cgh(s, member_id=mid)
    s.note("ConsumerGroupHeartbeat", r.error_code)
    epoch = r.member_epoch
    t = [{"name": s.topic(), "partitions": partitions((0, 11))}]
    s.note("OffsetCommit v9", commit(s, 9, t, epoch, mid))
    s.note("OffsetCommit v9(epoch + 1)", commit(s, 9, t, epoch + 1, mid))
    s.note("OffsetCommit v9(epoch - 1)", commit(s, 9, t, epoch - 1, mid))
    s.note("OffsetCommit v8", commit(s, 8, t, epoch, mid))
    s.note("OffsetCommit v9(unknown member)", commit(s, 9, t, epoch, "nobody"))
    s.note("OffsetCommit v9(simple)", commit(s, 9, t))
    s.note("OffsetCommit v8(simple)", commit(s, 8, t))
    s.note("OffsetFetch v9 member", fetch(s, 9, [topic(s, 0)], member_id=mid, member_epoch=epoch))
    s.note("OffsetFetch v9 stale epoch", fetch(s, 9, [topic(s, 0)], member_id=mid, member_epoch=epoch + 5))
    s.note(
        "OffsetFetch v9 unknown member", fetch(s, 9, [topic(s, 0)], member_id="nobody", member_epoch=epoch)
    )
    s.note("OffsetFetch v8", fetch(s, 8, [topic(s, 0)]))


def scenario_commit_older_epoch_per_partition(s: Session) -> None:
    """Kafka 4.3+: a commit with an older member epoch is accepted for the partitions the member
    has held since an epoch at or before it, and refused (STALE_MEMBER_EPOCH, nothing written)
    for one it was given later or does not hold. a keeps half of the partitions across b's join
    and leave and gets the other half back at a later epoch."""
    setup(s, 4)
    wait_visible_to_groups(s, [s.topic()])
    a, b = new_member_id(s), new_member_id(s)
    ra = diff_cgh(s, "a join", a, 0)
    first = ra.member_epoch
    rb = diff_cgh(s, "b join", b, 0)
    ra = diff_cgh(s, "a told to revoke", a, ra.member_epoch, owned=owned_of(s, ra))
    name = s.topic()
    kept = owned_of(s, ra)[name]
    ra = diff_cgh(s, "a revoked", a, ra.member_epoch, owned={name: kept})
    middle = ra.member_epoch
    diff_cgh(s, "b assigned", b, rb.member_epoch, owned={})
    diff_cgh(s, "b leaves", b, -1)
    ra = diff_cgh(s, "a takes all", a, middle, owned={name: kept})
    later = sorted(set(owned_of(s, ra)[name]) - set(kept))
    now = ra.member_epoch
    s.note("epochs", {"first": first, "middle": middle, "now": now, "kept": kept, "later": later})

    def t(*pairs: tuple[int, int]) -> list[dict[str, Any]]:
        return [{"name": s.topic(), "partitions": partitions(*pairs)}]

    s.note("OffsetCommit(middle epoch, kept)", commit(s, 9, t((kept[0], 5)), middle, a))
    s.note("OffsetCommit(middle epoch, given later)", commit(s, 9, t((later[0], 6)), middle, a))
    s.note("OffsetCommit(middle epoch, both)", commit(s, 9, t((kept[1], 7), (later[1], 8)), middle, a))
    s.note("OffsetCommit(before the first epoch, kept)", commit(s, 9, t((kept[0], 9)), first - 1, a))
    s.note(
        "OffsetCommit(middle epoch, unknown topic)",
        commit(s, 9, [{"name": s.topic("nope"), "partitions": partitions((0, 1))}], middle, a),
    )
    s.note("OffsetCommit(current epoch, given later)", commit(s, 9, t((later[0], 10)), now, a))
    s.note("OffsetFetch", fetch(s, 9, [topic(s, 0, 1, 2, 3)]))


def scenario_offset_delete(s: Session) -> None:
    setup(s)
    s.create_topic(s.topic("other"), 1)
    t = [{"name": s.topic(), "partitions": [{"partition_index": 0}, {"partition_index": 1}]}]
    s.note("OffsetDelete(no group)", s.raw(47, 0, group_id=s.group(), topics=t))
    commit(
        s,
        9,
        [
            {"name": s.topic(), "partitions": partitions((0, 5), (1, 6))},
            {"name": s.topic("other"), "partitions": partitions((0, 7))},
        ],
    )
    s.note("OffsetDelete(simple group)", s.raw(47, 0, group_id=s.group(), topics=t))
    s.note("OffsetFetch", fetch(s, 9, None))
    s.note(
        "OffsetDelete(unknown topic)",
        s.raw(
            47,
            0,
            group_id=s.group(),
            topics=[{"name": s.topic("nope"), "partitions": [{"partition_index": 0}]}],
        ),
    )


def scenario_offset_delete_classic_subscribed(s: Session) -> None:
    """A classic consumer-protocol group refuses to drop offsets of a topic a member subscribes
    to (GROUP_SUBSCRIBED_TO_TOPIC per partition) and drops the others."""
    setup(s)
    s.create_topic(s.topic("other"), 1)
    mid, gen = classic_member(s, s.topic())
    commit(
        s,
        9,
        [
            {"name": s.topic(), "partitions": partitions((0, 5))},
            {"name": s.topic("other"), "partitions": partitions((0, 7))},
        ],
        gen,
        mid,
    )
    s.note(
        "OffsetDelete",
        s.raw(
            47,
            0,
            group_id=s.group(),
            topics=[
                {"name": s.topic(), "partitions": [{"partition_index": 0}]},
                {"name": s.topic("other"), "partitions": [{"partition_index": 0}]},
            ],
        ),
    )
    s.note("OffsetFetch", fetch(s, 9, None))


def scenario_offset_delete_non_consumer_protocol(s: Session) -> None:
    """A classic group of another protocol type (no subscription to read) that is not empty:
    Kafka refuses with NON_EMPTY_GROUP."""
    setup(s)
    mid, gen = classic_member(s, s.topic(), protocol_type="connect")
    commit(s, 9, [{"name": s.topic(), "partitions": partitions((0, 5))}], gen, mid)
    s.note(
        "OffsetDelete",
        s.raw(
            47, 0, group_id=s.group(), topics=[{"name": s.topic(), "partitions": [{"partition_index": 0}]}]
        ),
    )


def scenario_offset_delete_consumer_group(s: Session) -> None:
    setup(s)
    s.create_topic(s.topic("other"), 1)
    mid = str(uuid.uuid4())
    r = cgh(s, member_id=mid)
    s.note("ConsumerGroupHeartbeat", r.error_code)
    commit(
        s,
        9,
        [
            {"name": s.topic(), "partitions": partitions((0, 5))},
            {"name": s.topic("other"), "partitions": partitions((0, 7))},
        ],
        r.member_epoch,
        mid,
    )
    s.note(
        "OffsetDelete",
        s.raw(
            47,
            0,
            group_id=s.group(),
            topics=[
                {"name": s.topic(), "partitions": [{"partition_index": 0}]},
                {"name": s.topic("other"), "partitions": [{"partition_index": 0}]},
            ],
        ),
    )
    s.note("OffsetFetch", fetch(s, 9, None))


def scenario_commit_during_rebalance(s: Session) -> None:
    """A classic member committing while its group rebalances: REBALANCE_IN_PROGRESS."""
    setup(s)
    mid, gen = classic_member(s, s.topic())
    b = client(s)
    mid_b = member_id(s, c=b)

    fb = in_thread(lambda: join(s, c=b, member_id=mid_b))
    wait_state(s, "PreparingRebalance")
    t = [{"name": s.topic(), "partitions": partitions((0, 9))}]
    s.note("OffsetCommit v9(preparing rebalance)", commit(s, 9, t, gen, mid))
    s.note("OffsetCommit v9(simple, preparing rebalance)", commit(s, 9, t))
    r = join(s, member_id=mid)
    fb.result(30)
    s.note("OffsetCommit v9(completing rebalance)", commit(s, 9, t, r.generation_id, mid))
    s.note("OffsetCommit v9(completing rebalance, old gen)", commit(s, 9, t, gen, mid))
    b.close()


def scenario_commit_with_retention_time(s: Session) -> None:
    """OffsetCommit v2-v4 carry a retention time (ignored by Kafka 4.x, which expires by group
    state); a classic member commits with it, an admin without."""
    setup(s)
    mid, gen = classic_member(s, s.topic())
    for v in (2, 3, 4):
        t = [{"name": s.topic(), "partitions": partitions((v % 2, v))}]
        s.note(f"OffsetCommit v{v} retention", commit(s, v, t, gen, mid, retention_time=1000))
    s.note("OffsetFetch v3", fetch(s, 3, [topic(s, 0, 1)]))


def scenario_fetch_with_member_on_unknown_or_emptied_groups(s: Session) -> None:
    """OffsetFetch v9 naming a member: a group that does not exist, and a consumer group whose
    only member left; OffsetDelete on that empty consumer group."""
    setup(s)
    s.note("OffsetFetch v9 member, no group", fetch(s, 9, [topic(s, 0)], member_id="m", member_epoch=1))
    mid = str(uuid.uuid4())
    r = cgh(s, member_id=mid)
    s.note("ConsumerGroupHeartbeat", r.error_code)
    commit(s, 9, [{"name": s.topic(), "partitions": partitions((0, 3))}], r.member_epoch, mid)
    s.note("ConsumerGroupHeartbeat leave", cgh(s, member_id=mid, member_epoch=-1).error_code)
    s.note(
        "OffsetFetch v9 departed member",
        fetch(s, 9, [topic(s, 0)], member_id=mid, member_epoch=r.member_epoch),
    )
    s.note("OffsetFetch v9 admin", fetch(s, 9, [topic(s, 0)]))
    s.note(
        "OffsetDelete(empty consumer group)",
        s.raw(
            47, 0, group_id=s.group(), topics=[{"name": s.topic(), "partitions": [{"partition_index": 0}]}]
        ),
    )
    s.note(
        "OffsetCommit v9 admin to empty consumer group",
        commit(s, 9, [{"name": s.topic(), "partitions": partitions((1, 4))}]),
    )


SCENARIOS: list[Callable[[Session], None]] = [
    scenario_commit_with_retention_time,
    scenario_fetch_with_member_on_unknown_or_emptied_groups,
    scenario_simple_commit_fetch_across_versions,
    scenario_fetch_all_topics_and_unknown,
    scenario_fetch_batched_groups,
    scenario_commit_unknown_topic_and_partition,
    scenario_commit_metadata_too_large,
    scenario_commit_classic_generation_checks,
    scenario_commit_generation_to_new_or_empty_group,
    scenario_commit_consumer_group_epochs,
    scenario_commit_older_epoch_per_partition,
    scenario_offset_delete,
    scenario_offset_delete_classic_subscribed,
    scenario_offset_delete_non_consumer_protocol,
    scenario_offset_delete_consumer_group,
    scenario_commit_during_rebalance,
]
KNOWN: dict[str, dict[str, str]] = {}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[f.__name__.removeprefix("scenario_") for f in SCENARIOS])
def test_offsets(scenario: Callable[[Session], None], differential_pair: tuple[str, str]) -> None:
    compare(run_both(scenario, *differential_pair), KNOWN.get(scenario.__name__, {}))

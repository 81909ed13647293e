"""Proof of the `groupshift check` verdicts that depend on broker settings, read live with
DescribeConfigs from a real Apache Kafka 4.3 node and from a groupshift server given the same
settings (`differential_pairs`):

- `group.consumer.migration.policy=disabled`: a classic group is NOT-READY for the upgrade
  ("online upgrade is disabled."), and a KIP-848 member is refused with exactly that; a consumer
  group is UNSAFE to roll back to classic clients, and a classic member is indeed refused
  INCONSISTENT_GROUP_PROTOCOL.
- `group.consumer.max.size=1`: a classic group of two is NOT-READY ("the group size exceeds the
  consumer group maximum size."), and a KIP-848 member is refused with exactly that.
"""

from __future__ import annotations

import uuid
from functools import partial
from typing import Any

import pytest

from e2e.differential import Session
from e2e.differential_classic import client, coordinator_loaded, in_thread, join, sync
from e2e.test_check_upgrade import check, consumer_protocol_member, heartbeat_refusal, solo, verdicts
from translation.embedded_protocol import Subscription, serialize_assignment, serialize_subscription

pytestmark = pytest.mark.e2e


def sessions(pair: tuple[str, str]) -> dict[str, Session]:
    names = {"run": uuid.uuid4().hex[:6]}
    return {"kafka": Session("kafka", pair[0], names), "groupshift": Session("groupshift", pair[1], names)}


def test_policy_disabled(differential_pairs: Any) -> None:
    pair = differential_pairs(group_consumer_migration_policy="disabled")
    for backend, s in sessions(pair).items():
        bootstrap = pair[0] if backend == "kafka" else pair[1]
        s.create_topic(s.topic("orders"), 3)
        classic = s.group("classic")
        solo(s, "classic")
        code, doc = check(["--bootstrap-server", bootstrap, classic])
        verdict, reason, message = verdicts(doc)[classic]
        assert (code, verdict) == (1, "NOT-READY"), (backend, doc)
        assert reason.startswith("group.consumer.migration.policy is disabled"), backend
        assert heartbeat_refusal(s, classic) == ("group_id_not_found", message), backend
        assert (
            message
            == f"Cannot upgrade classic group {classic} to consumer group because online upgrade is disabled."
        )

        cg = s.group("cg")
        with consumer_protocol_member(s, cg):
            code, doc = check(["--to", "classic-protocol", "--bootstrap-server", bootstrap, cg], "downgrade")
            verdict, reason, _ = verdicts(doc)[cg]
            assert (code, verdict) == (2, "UNSAFE"), (backend, doc)
            assert "INCONSISTENT_GROUP_PROTOCOL" in reason
            over: dict[str, Any] = {"group_id": cg, "session_timeout": 30000}
            r = join(s, **over)
            if r.error_code.name == "member_id_required":
                r = join(s, member_id=r.member_id, **over)
            assert r.error_code.name == "inconsistent_group_protocol", (backend, r)
        s.close()


def test_consumer_max_size(differential_pairs: Any) -> None:
    pair = differential_pairs(group_consumer_max_size="1")
    for backend, s in sessions(pair).items():
        bootstrap = pair[0] if backend == "kafka" else pair[1]
        topic = s.topic("orders")
        s.create_topic(topic, 3)
        gid = s.group("two")
        coordinator_loaded(s, gid)
        meta = serialize_subscription(Subscription(1, (topic,)))
        over: dict[str, Any] = {
            "group_id": gid,
            "protocols": [{"name": "range", "metadata": meta}],
            "session_timeout": 120_000,
        }
        a, b = client(s), client(s)
        ra = join(s, c=a, **over)
        ra = join(s, c=a, member_id=ra.member_id, **over)
        assert ra.error_code.name == "none", (backend, ra)
        first = sync(s, ra.generation_id, ra.member_id, c=a, group_id=gid, assignments=[])
        assert first.error_code.name == "none", (backend, first)
        rb = join(s, c=b, **over)
        fb = in_thread(partial(join, s, c=b, member_id=rb.member_id, **over))  # parks: a must rejoin
        ra2 = join(s, c=a, member_id=ra.member_id, **over)
        rb2 = fb.result(30)
        assert (ra2.error_code.name, rb2.error_code.name) == ("none", "none"), (backend, ra2, rb2)
        gen = ra2.generation_id
        assignments = [
            {"member_id": ra.member_id, "assignment": serialize_assignment({topic: [0, 1]}, 1)},
            {"member_id": rb.member_id, "assignment": serialize_assignment({topic: [2]}, 1)},
        ]
        leader = ra.member_id if ra2.leader == ra.member_id else rb.member_id
        leader_conn, other_conn = (a, b) if leader == ra.member_id else (b, a)
        other = rb.member_id if leader == ra.member_id else ra.member_id
        assert (
            sync(s, gen, leader, c=leader_conn, group_id=gid, assignments=assignments).error_code.name
            == "none"
        )
        assert sync(s, gen, other, c=other_conn, group_id=gid).error_code.name == "none"

        code, doc = check(["--bootstrap-server", bootstrap, gid])
        verdict, reason, message = verdicts(doc)[gid]
        assert (code, verdict) == (1, "NOT-READY"), (backend, doc)
        assert reason.startswith("2 members exceed group.consumer.max.size=1"), backend
        assert message == (
            f"Cannot upgrade classic group {gid} to consumer group because the group size exceeds the "
            "consumer group maximum size."
        )
        assert heartbeat_refusal(s, gid) == ("group_id_not_found", message), backend
        a.close()
        b.close()
        s.close()

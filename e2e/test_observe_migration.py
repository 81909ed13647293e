"""A migration you can watch: the event log, the per-group metrics and the health probes of a live
`groupshift serve` while real clients roll a group from the classic protocol to KIP-848.

Two kafka-python members (classic, eager `range`) form a group; one leaves and a confluent-kafka
member with `group.protocol=consumer` joins (the group converts), then the other classic member
is replaced the same way; finally the KIP-848 members close. The server's JSON log must tell the
story member by member (`member.joined` with client id, host, protocol and assignor,
`group.converted` at warning level, `member.assignment_changed` with the partitions added,
`member.left` for every clean leave and no `member.fenced`), and `/metrics` must count the
members by protocol at every step (the count of members still to roll). About 25 s.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from e2e.conftest import Gateways
from e2e.expected import PARTITIONS
from e2e.groups import (
    FAST_GROUP_SETTINGS,
    ConfluentMember,
    KafkaPythonMember,
    Ledger,
    create_topic,
    produce,
    wait_partitioned,
    wait_until,
)
from e2e.harness import GatewayProcess

TOPIC = "watched"
GROUP = "watched-group"


def get(gw: GatewayProcess, path: str) -> tuple[int, str]:
    assert gw.metrics_url is not None
    url = gw.metrics_url.rsplit("/", 1)[0] + path
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def series(gw: GatewayProcess, name: str) -> dict[str, float]:
    """`{labels text: value}` of one metric family from a fresh scrape."""
    out: dict[str, float] = {}
    for line in gw.metrics().splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            labels, _, value = line[len(name) :].rpartition(" ")
            out[labels] = float(value)
    return out


def members_by_protocol(gw: GatewayProcess) -> tuple[float, float]:
    s = series(gw, "groupshift_group_members")
    return (
        s.get(f'{{group="{GROUP}",protocol="classic"}}', -1),
        s.get(f'{{group="{GROUP}",protocol="consumer"}}', -1),
    )


def group_events(gw: GatewayProcess, name: str) -> list[dict[str, Any]]:
    return [e for e in gw.events(name) if e.get("group") == GROUP]


def test_upgrade_story_in_events_and_metrics(gateways: Gateways) -> None:
    gw = gateways.start("observe", sets=[*FAST_GROUP_SETTINGS, "metrics.listen=127.0.0.1:0"])
    status, body = get(gw, "/health/live")
    assert status == 200 and json.loads(body) == {"live": True}
    status, body = get(gw, "/health/ready")
    assert status == 200
    assert json.loads(body) == {"ready": True, "listener_accepting": True, "coordinator_shards_loaded": True}
    assert get(gw, "/health/nothing")[0] == 404

    create_topic(gw, TOPIC)
    produce(gw, TOPIC, range(600))
    ledger = Ledger(TOPIC)
    k1 = KafkaPythonMember("kp-1", ledger, gw.bootstrap, GROUP).start()
    k2 = KafkaPythonMember("kp-2", ledger, gw.bootstrap, GROUP).start()
    wait_partitioned([k1, k2], "two classic members", per_member=PARTITIONS // 2)
    assert members_by_protocol(gw) == (2, 0)

    k1.stop()
    c1 = ConfluentMember("cf-1", ledger, gw.bootstrap, GROUP, **{"group.protocol": "consumer"}).start()
    wait_partitioned([k2, c1], "one classic, one KIP-848 member", per_member=PARTITIONS // 2)
    assert members_by_protocol(gw) == (1, 1)
    assert series(gw, "groupshift_group_conversions_total") == {f'{{group="{GROUP}",direction="upgrade"}}': 1}

    k2.stop()
    c2 = ConfluentMember("cf-2", ledger, gw.bootstrap, GROUP, **{"group.protocol": "consumer"}).start()
    wait_partitioned([c1, c2], "two KIP-848 members", per_member=PARTITIONS // 2)

    def cf2_added() -> set[str]:
        member = {e["client_id"]: e["member"] for e in group_events(gw, "member.joined")}.get("cf-2")
        changes = group_events(gw, "member.assignment_changed")
        return {p for e in changes if e["member"] == member for p in e["added"]}

    # What cf-2 was handed when it joined, read before anyone leaves: once c1 stops, cf-2 is
    # handed c1's partitions too (how fast depends on the machine's load).
    wait_until(lambda: len(cf2_added()) >= PARTITIONS // 2, 10, "cf-2's assignment in the event log")
    added_on_join = cf2_added()
    assert members_by_protocol(gw) == (0, 2)
    assert series(gw, "groupshift_group_seconds_since_stable")[f'{{group="{GROUP}"}}'] == 0
    epoch = series(gw, "groupshift_group_epoch")[f'{{group="{GROUP}"}}']
    assert epoch >= 3  # two classic generations at least, then bumps for every join and leave

    wait_until(lambda: ledger.distinct() >= 600, 30, "every record read")
    c1.stop()
    c2.stop()
    wait_until(lambda: members_by_protocol(gw) == (0, 0), 10, "members gone from the metrics")
    produce(gw, TOPIC, range(600, 660))  # 60 records behind the group's commits
    lag = series(gw, "groupshift_group_committed_offset_lag")[f'{{group="{GROUP}"}}']
    assert lag == 60

    joined = {e["client_id"]: e for e in group_events(gw, "member.joined")}
    assert {c: (e["protocol"], e["client_host"].lstrip("/")) for c, e in joined.items()} == {
        "kp-1": ("classic", "127.0.0.1"),
        "kp-2": ("classic", "127.0.0.1"),
        "cf-1": ("consumer", "127.0.0.1"),
        "cf-2": ("consumer", "127.0.0.1"),
    }
    assert "range" in joined["kp-1"]["assignor"]
    assert joined["cf-1"]["assignor"] == "uniform"

    [converted] = group_events(gw, "group.converted")
    assert converted["level"] == "warning"
    assert (converted["from_type"], converted["to_type"]) == ("classic", "consumer")

    left = [e["member"] for e in group_events(gw, "member.left")]
    ids = {c: e["member"] for c, e in joined.items()}
    assert set(left) >= set(ids.values()), (left, ids)
    assert group_events(gw, "member.fenced") == []

    changes = group_events(gw, "member.assignment_changed")
    added = {p for e in changes if e["member"] == ids["cf-2"] for p in e["added"]}
    assert added >= added_on_join
    assert len(added_on_join) == PARTITIONS // 2 and all(p.startswith(f"{TOPIC}-") for p in added_on_join)
    kip848 = [e for e in changes if e.get("protocol") != "classic"]
    want = {"member_epoch", "target_epoch", "revoked", "pending_revocation", "pending_assignment"}
    assert kip848 and all(want <= e.keys() for e in kip848)
    # While the group was classic, each installed generation told who got what.
    classic = [e for e in changes if e.get("protocol") == "classic" and e["member"] == ids["kp-2"]]
    # (the one with kp-1 and kp-2 gave each half; whether generations with kp-2 alone were
    # installed before kp-1 joined or after it left, before cf-1's join converted the group,
    # depends on timing)
    assert any(len(e["assigned"]) == PARTITIONS // 2 for e in classic), classic
    sizes_ok = all(len(e["assigned"]) in (PARTITIONS // 2, PARTITIONS) for e in classic)
    assert sizes_ok and all(p.startswith(f"{TOPIC}-") for e in classic for p in e["assigned"]), classic
    # The story is in order: kp-1 left, the group converted (cf-1 joined), kp-2 left, the
    # KIP-848 members left last.
    story = [
        (e["event"], e["member"])
        for e in gw.events()
        if e.get("group") == GROUP and e["event"] in ("group.converted", "member.left")
        for e in [{**e, "member": e.get("member", "")}]
    ]
    assert story.index(("member.left", ids["kp-1"])) < story.index(("group.converted", ""))
    assert story.index(("group.converted", "")) < story.index(("member.left", ids["kp-2"]))
    assert {m for _, m in story[-2:]} == {ids["cf-1"], ids["cf-2"]}
    for m in (k1, k2, c1, c2):
        assert not m.errors, (m.name, m.errors)


def test_per_group_metrics_can_be_switched_off_and_capped(gateways: Gateways) -> None:
    off = gateways.start("off", sets=["metrics.listen=127.0.0.1:0", "metrics.groups.enabled=false"])
    capped = gateways.start("capped", sets=["metrics.listen=127.0.0.1:0", "metrics.groups.max=2"])
    for gw in (off, capped):
        create_topic(gw, TOPIC)
        from kafka import KafkaConsumer, TopicPartition
        from kafka.structs import OffsetAndMetadata

        for i in range(4):  # offsets-only groups: 4 groups, committed without joining
            c = KafkaConsumer(bootstrap_servers=gw.bootstrap, group_id=f"g{i}", enable_auto_commit=False)
            try:
                tp = TopicPartition(TOPIC, 0)
                c.assign([tp])
                c.commit({tp: OffsetAndMetadata(0, "", -1)})
            finally:
                c.close()
    assert "groupshift_group_members" not in off.metrics()
    assert series(off, "groupshift_groups")  # the aggregates stay
    lag = series(capped, "groupshift_group_committed_offset_lag")
    assert len(lag) == 2
    assert series(capped, "groupshift_group_metrics_untracked_groups") == {"": 2}

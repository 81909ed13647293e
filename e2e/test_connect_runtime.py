"""A real Kafka Connect cluster on groupshift (issue 32, point 2: "a real 3-worker Kafka Connect
cluster ... running on groupshift in classic mode").

Three distributed workers (`ConnectDistributed` from Maven's `connect-runtime`,
harness/kafka_dist/connect.py) join one classic group of protocol type `connect` on
`groupshift serve` with `connect.protocol=sessioned` (KIP-507, Connect's default): the leader
runs Connect's IncrementalCooperativeAssignor in its SyncGroup, and groupshift only carries the
bytes, as Kafka's classic coordinator does. Through the REST API: a FileStreamSource connector
(one task whatever `tasks.max` says: it reads one file) writes the lines of a file to a topic of
three partitions, and a FileStreamSink connector with `tasks.max=3` (three tasks, one partition
each) writes that topic to another file. Checked:

- groupshift's DescribeGroups shows one Stable classic group, protocol type `connect`,
  protocol `sessioned`, one member per worker with Connect's v2 metadata;
- every worker's `/connectors/<name>/status` (read from the status topic each worker follows)
  shows the same placement, every connector and task RUNNING, and all three workers hold some
  of the six (2 connectors + 4 tasks: the assignor balances connectors and tasks separately,
  each count within one between workers);
- the lines of the input file arrive in the output file;
- a worker killed with SIGKILL (no LeaveGroup: the group notices at its session timeout) has its
  connectors and tasks moved to the other two once Connect's `scheduled.rebalance.max.delay.ms`
  has passed, the two agree on it, and lines appended afterwards still arrive;
- across the whole run no connector or task was ever run by two workers at once: the workers'
  own logs ("Creating task" / "Stopping task", "Creating connector" / "Stopping connector",
  epoch-ms timestamps; a killed worker's end is its kill) give each one's intervals per worker.

What groupshift reads of the group (translation/connect_classic_protocol.py, the conversion's
foundation): every worker's stored JoinGroup metadata and the leader's SyncGroup assignments
(`sessioned`: version 2) re-encode byte for byte and decode to exactly the connectors and tasks
each worker's REST API reports; `groups describe` / `migration` and `check upgrade` show them.
At the end a worker with `connect.protocol=eager` turns the group to `default` (v0 frames,
decoded the same way), which `check upgrade` names as blocking a conversion.

The online conversion (translation/connect_upgrade.py, connect_classic_worker.py,
connect_downgrade.py; docs/connect-groups.md, "Conversion with a real Connect cluster"): with the
killed worker gone, an SDK worker (connect_worker/, ConnectGroupHeartbeat, given the same
connectors and task counts) joining converts the group to a connect group; the classic workers
keep running what they ran and get Connect's own assignments from the connect group's target
(the SDK worker computes it and takes its share: revoked from a classic worker before it gets
it); the SDK worker leaving converts the group back to a classic one, and the killed worker,
restarted, joins it: the three classic workers end balanced. Across it all no connector or task
ran on two workers at once (the workers' logs and the SDK's callbacks).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from connect_worker import ConnectWorkerThread
from e2e.conftest import Gateways
from e2e.groups import create_topic
from e2e.groups_cli import groups_json, ok, table
from e2e.harness import GatewayProcess
from groupshift.cli import main as groupshift_main
from harness.kafka_dist.connect import (
    QUICK_SETTINGS,
    SHAPE,
    SINK,
    SOURCE,
    ConnectError,
    ConnectWorker,
    SdkSpans,
    agreed_placement,
    connect_dist,
    converted_placement,
    described,
    every_item,
    file_connectors,
    overlaps,
    ownership_intervals,
    sdk_worker,
    spread,
    worker_properties,
)
from protocol.client import WireClient, make_request
from tools.groups.connect_classic import decode_worker
from translation.connect_classic_protocol import (
    EAGER,
    SESSIONED,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
    task_name,
)

pytestmark = pytest.mark.e2e

GROUP = "connect-cluster"
TOPIC = "connect-lines"
#: Connect's quick settings (harness/kafka_dist/connect.py: QUICK_SETTINGS; SOURCE, SINK, SHAPE).
WORKER_SETTINGS = QUICK_SETTINGS
FIRST = [f"line {i} before the kill" for i in range(200)]
AFTER = [f"line {i} after the kill" for i in range(100)]


@dataclass
class Cluster:
    gateway: GatewayProcess
    workers: list[ConnectWorker]
    input_file: Path
    output_file: Path

    def alive(self) -> list[ConnectWorker]:
        return [w for w in self.workers if w.proc.poll() is None]


def wait_for(what: str, check: Callable[[], Any], timeout: float, cluster: Cluster) -> Any:
    """`check()`'s first truthy answer (a ConnectError counts as not yet), or a failure that
    shows what the last check saw and each worker's log tail."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except ConnectError as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(0.5)
    tails = "\n".join(f"--- {w.url} ---\n{w.tail(15)}" for w in cluster.workers)
    pytest.fail(f"{what} not within {timeout:.0f}s; last: {last!r}\n{tails}")


def classic_group(cluster: Cluster) -> tuple[str, str, str, list[tuple[str, int]]]:
    """The Connect group as groupshift's DescribeGroups v5 shows it: state, protocol type,
    protocol, and per member its client id and the version its metadata starts with (Connect's
    protocol header: 2 for `sessioned`)."""
    with WireClient(cluster.gateway.port) as c:
        r = c.request(make_request(15, 5, groups=[GROUP], include_authorized_operations=False))
    (g,) = r.groups
    members = [(m.client_id, int.from_bytes(bytes(m.member_metadata)[:2], "big")) for m in g.members]
    return g.group_state, g.protocol_type, g.protocol_data, sorted(members)


def output_lines(cluster: Cluster) -> set[str]:
    try:
        return set(cluster.output_file.read_text().splitlines())
    except FileNotFoundError:
        return set()


def put_connector(cluster: Cluster, name: str, config: dict[str, str]) -> None:
    """Create a connector through the first worker (forwarded to the leader), again while the
    group is still forming (409: "Cannot complete request ... worker rebalance")."""
    wait_for(
        f"connector {name} created",
        lambda: cluster.workers[0].rest("PUT", f"/connectors/{name}/config", config) is not None,
        60,
        cluster,
    )


@pytest.fixture(scope="module")
def cluster(module_gateways: Gateways, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    dist = connect_dist()
    base = tmp_path_factory.mktemp("connect-runtime")
    gw = module_gateways.start("connect-runtime", sets=("group.connect.enable=true",))
    create_topic(gw, TOPIC, partitions=3)
    props = worker_properties(gw.bootstrap, GROUP, WORKER_SETTINGS)
    workers = [ConnectWorker(dist, base / f"worker-{i}", props) for i in range(3)]
    c = Cluster(gw, workers, base / "input.txt", base / "output.txt")
    try:
        for w in workers:
            w.wait_rest()
        c.input_file.write_text("".join(f"{line}\n" for line in FIRST))
        for name, config in file_connectors(c.input_file, c.output_file, TOPIC).items():
            put_connector(c, name, config)
        yield c
    finally:
        for w in workers:  # all told at once: Connect's clean shutdown takes seconds each
            if w.proc.poll() is None:
                w.proc.terminate()
        for w in workers:
            w.stop()


def test_three_workers_agree_on_the_assignment_and_data_flows(cluster: Cluster) -> None:
    where = wait_for(
        "one placement, seen by all, on all three workers",
        lambda: spread(cluster.workers, SHAPE),
        90,
        cluster,
    )
    assert sorted(where) == sorted([SOURCE, f"{SOURCE}-0", SINK, f"{SINK}-0", f"{SINK}-1", f"{SINK}-2"])
    # The incremental cooperative assignor balances connectors and tasks separately: each count
    # differs by at most one between workers (2 connectors: 1, 1, 0; 4 tasks: 2, 1, 1).
    for kind in (lambda item: item in (SOURCE, SINK), lambda item: item not in (SOURCE, SINK)):
        counts = [sum(1 for i, w in where.items() if kind(i) and w == x.worker_id) for x in cluster.workers]
        assert max(counts) - min(counts) <= 1, where
    # a classic group of Connect's protocol type on KIP-507's sessioned protocol, one member a worker
    ids = sorted(f"connect-{w.worker_id}" for w in cluster.workers)
    assert classic_group(cluster) == ("Stable", "connect", "sessioned", [(i, 2) for i in ids])
    wait_for("every input line in the output file", lambda: output_lines(cluster) >= set(FIRST), 60, cluster)
    assert output_lines(cluster) == set(FIRST)
    intervals = ownership_intervals(cluster.workers)
    assert set(intervals) == set(where)  # the logs name every one of them
    assert overlaps(intervals) == []


def by_worker(where: dict[str, str]) -> dict[str, list[str]]:
    """The placement per worker id: its connectors and tasks, sorted."""
    out: dict[str, list[str]] = {}
    for item, worker in where.items():
        out.setdefault(worker, []).append(item)
    return {w: sorted(items) for w, items in out.items()}


def worker_id_of(url: str) -> str:
    """Connect's worker id from the URL a worker advertises (`http://127.0.0.1:PORT/`)."""
    return url.split("://", 1)[1].rstrip("/")


def stored_frames(cluster: Cluster) -> tuple[str, list[Any]] | None:
    """DescribeGroups' view of the classic group once Stable: its protocol and, per worker, the
    JoinGroup metadata and SyncGroup assignment groupshift stores for it."""
    with WireClient(cluster.gateway.port) as c:
        r = c.request(make_request(15, 5, groups=[GROUP], include_authorized_operations=False))
    (g,) = r.groups
    if g.group_state != "Stable" or any(not m.member_assignment for m in g.members):
        return None
    return g.protocol_data, list(g.members)


def test_the_workers_frames_decode_to_what_they_run_and_the_tools_show_it(cluster: Cluster) -> None:
    """Connect's real JoinGroup metadata (ExtendedWorkerState) and the leader's SyncGroup
    assignments (ExtendedAssignment, `sessioned`: version 2) as groupshift stores them decode to
    the connectors and tasks each worker's REST API says it runs, and encode back to the same
    bytes; `groups describe` / `migration` and `check upgrade` show them."""
    where = wait_for(
        "one placement, seen by all, on all three workers",
        lambda: spread(cluster.workers, SHAPE),
        90,
        cluster,
    )
    expected = by_worker(where)
    decoded: dict[str, Any] = {}

    def frames_agree() -> bool:
        found = stored_frames(cluster)
        if found is None:
            return False
        protocol, members = found
        assert protocol == SESSIONED
        decoded.clear()
        for m in members:
            raw_metadata, raw_assignment = bytes(m.member_metadata), bytes(m.member_assignment)
            metadata, assignment = decode_metadata(raw_metadata), decode_assignment(raw_assignment)
            assert (
                encode_metadata(metadata) == raw_metadata and encode_assignment(assignment) == raw_assignment
            )
            assert metadata.version == assignment.version == 2, (metadata, assignment)
            assert metadata.allocation is None or metadata.allocation.version == 2
            worker = decode_worker(
                m.member_id, m.client_id, m.client_host, None, raw_metadata, raw_assignment
            )
            assert worker.decode_error is None
            decoded[worker_id_of(metadata.url)] = (m.member_id, metadata, assignment, worker)
        runs = {w: sorted(worker.running) for w, (_, _, _, worker) in decoded.items()}
        return runs == expected

    wait_for("the stored frames decoded to the REST API's placement", frames_agree, 60, cluster)
    assert set(decoded) == {w.worker_id for w in cluster.workers}
    leaders = {(a.leader, a.leader_url) for _, _, a, _ in decoded.values()}
    assert len(leaders) == 1, leaders  # one leader, named alike in every assignment
    ((leader, leader_url),) = leaders
    assert leader in {member_id for member_id, _, _, _ in decoded.values()}
    assert worker_id_of(leader_url) in decoded
    offsets = {a.config_offset for _, _, a, _ in decoded.values()}
    assert len(offsets) == 1 and offsets.pop() >= 2  # two connector configs (and their task configs) read
    assert all(a.error == 0 for _, _, a, _ in decoded.values())

    # -- the operator tools ----------------------------------------------------------------
    bootstrap = cluster.gateway.bootstrap
    described = groups_json(bootstrap, "describe", GROUP)
    assert described["kafka_connect"] is True and described["protocol_type"] == "connect"
    got = {worker_id_of(m["url"]): m for m in described["members"]}
    assert {w: sorted(m["connectors"] + m["tasks"]) for w, m in got.items()} == expected
    for w, (member_id, metadata, _, _) in decoded.items():
        assert got[w]["member_id"] == member_id and got[w]["config_offset"] == metadata.config_offset
    plain = table(ok(bootstrap, "describe", GROUP))  # the default view: the workers too
    assert {(worker_id_of(r["URL"]), r["SUB-PROTOCOL"], r["#CONNECTORS"], r["#TASKS"]) for r in plain} == {
        (w, SESSIONED, str(sum(1 for i in items if i in SHAPE)), str(sum(1 for i in items if i not in SHAPE)))
        for w, items in expected.items()
    }
    rows = table(ok(bootstrap, "describe", GROUP, "--members", "--verbose"))
    assert {worker_id_of(r["URL"]) for r in rows} == set(expected)
    assert {r["SUB-PROTOCOL"] for r in rows} == {SESSIONED}
    assert [r["LEADER"] for r in rows].count("yes") == 1
    for r in rows:
        items = [i for i in (r["CONNECTORS"] + "," + r["TASKS"]).split(",") if i and i != "-"]
        assert sorted(items) == expected[worker_id_of(r["URL"])], r
    (state,) = table(ok(bootstrap, "describe", GROUP, "--state"))
    assert state["TYPE"] == "Classic (Kafka Connect)" and state["ASSIGNMENT-STRATEGY"] == SESSIONED

    view = groups_json(bootstrap, "migration", GROUP)
    connect = view["kafka_connect"]
    assert connect["protocol"] == SESSIONED and connect["blockers"] == []
    assert connect["conversion_built"] is True and connect["convertible"] is True
    assert connect["leader"] == leader and connect["leader_url"] == leader_url
    assert {
        worker_id_of(m["url"]): sorted(m["connectors"] + m["tasks"]) for m in connect["members"]
    } == expected
    text = ok(bootstrap, "migration", GROUP)
    assert "Kafka Connect workers (classic protocol, sub-protocol sessioned" in text
    assert "Conversion to a connect group: nothing in the group blocks it" in text
    assert "does not convert" not in text

    (verdict,) = check_upgrade(bootstrap, GROUP)
    assert verdict["verdict"] == "READY"
    assert verdict["reason"] == "classic Kafka Connect group: converts when an SDK worker joins", verdict
    details = {d["name"]: d for d in verdict["details"]}
    assert details["connect-conversion"]["status"] == "ok", verdict
    assert (
        "3 worker(s), sub-protocol sessioned, 2 connector(s) and 4 task(s)"
        in details["connect-conversion"]["reason"]
    )
    assert details["connect-online-conversion"]["status"] == "ok"
    assert "connect-sub-protocol" not in details
    # The same from the records groupshift stored (the GroupMetadata record's members).
    (stored,) = check_upgrade(bootstrap, GROUP, "--data-dir", str(cluster.gateway.data_dir))
    assert (stored["verdict"], stored["reason"]) == (verdict["verdict"], verdict["reason"])
    assert [(d["name"], d["status"], d["reason"]) for d in stored["details"]] == [
        (d["name"], d["status"], d["reason"]) for d in verdict["details"] if d["name"] != "server"
    ]  # (a live read also judges the server)


def check_upgrade(bootstrap: str, group: str, *source: str) -> list[dict[str, Any]]:
    """`groupshift check upgrade --json` of `group`, in this process, against the live gateway
    (or `source`, e.g. `--data-dir DIR`)."""
    import contextlib
    import io
    import json

    out = io.StringIO()
    args = list(source) or ["--bootstrap-server", bootstrap]
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        groupshift_main(["check", "upgrade", *args, group, "--json"])
    return [v for v in json.loads(out.getvalue())["groups"] if v["group"] == group]


def test_a_killed_worker_s_work_moves_to_the_others(cluster: Cluster) -> None:
    before = wait_for(
        "one placement, seen by all, on all three workers",
        lambda: spread(cluster.workers, SHAPE),
        90,
        cluster,
    )
    # the worker holding the most (a connector and a task, or more) dies
    victim = max(cluster.workers, key=lambda w: list(before.values()).count(w.worker_id))
    moved = {item for item, worker in before.items() if worker == victim.worker_id}
    assert len(moved) >= 2
    victim.kill()
    survivors = {w.worker_id for w in cluster.workers if w is not victim}

    def reassigned() -> dict[str, str] | None:
        found = agreed_placement(cluster.workers, SHAPE)
        return found if found and set(found.values()) <= survivors else None

    after = wait_for("the killed worker's work on the other two", reassigned, 90, cluster)
    assert set(after) == set(before)
    assert set(after.values()) == survivors
    ids = sorted(f"connect-{w}" for w in survivors)
    assert classic_group(cluster) == ("Stable", "connect", "sessioned", [(i, 2) for i in ids])
    with cluster.input_file.open("a") as f:
        f.write("".join(f"{line}\n" for line in AFTER))
    wait_for(
        "the lines appended after the kill in the output file",
        lambda: output_lines(cluster) >= set(FIRST) | set(AFTER),
        60,
        cluster,
    )
    assert output_lines(cluster) == set(FIRST) | set(AFTER)
    intervals = ownership_intervals(cluster.workers)
    assert overlaps(intervals) == []
    for item in moved:  # ran on the victim, then on a survivor
        owners = [worker for _, _, worker in sorted(intervals[item])]
        assert owners[-1] in survivors and victim.worker_id in owners, (item, owners)


def test_an_sdk_worker_converts_the_group_and_back(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The killed worker replaced by an SDK worker: the group converts to a connect group, the
    classic workers keep running their share, the SDK worker gets its share only once a classic
    worker stopped it; the SDK worker leaving converts the group back, and the killed worker,
    restarted, joins it: three classic workers, balanced."""
    wait_for(
        "one placement, seen by all, on every worker", lambda: spread(cluster.workers, SHAPE), 90, cluster
    )
    sdk_url = "http://sdk-worker:8083"
    spans = SdkSpans(sdk_url)  # the SDK's side: (from_ms, to_ms, item)
    sdk = sdk_worker(cluster.gateway.bootstrap, GROUP, spans, SHAPE)
    thread = ConnectWorkerThread(sdk, name="sdk-worker")
    thread.start()
    try:
        # Converted: one connect group, the SDK worker with its share, the classic workers
        # running exactly the rest (their logs), nothing twice.
        def converted_and_settled() -> dict[str, set[str]] | None:
            if sdk.error is not None:
                raise AssertionError(f"the SDK worker failed: {sdk.error}")
            if described(cluster.gateway.bootstrap, GROUP) != ("Stable", "connect", "incremental", 3):
                return None
            return converted_placement(cluster.workers, spans, SHAPE)

        converted = wait_for(
            "the group converted, the SDK worker with its share", converted_and_settled, 60, cluster
        )
        assert set(converted) == {w.worker_id for w in cluster.alive()} | {sdk_url}
        assert set().union(*converted.values()) == every_item(SHAPE)
        sizes = sorted(len(items) for items in converted.values())
        assert sizes[-1] - sizes[0] <= 2, converted  # connectors and tasks each within one
    finally:
        thread.close()
    spans.left()
    assert sdk.error is None, sdk.error

    # Back to classic: the two classic workers take the SDK worker's share.
    wait_for(
        "the group classic again, its work on the classic workers",
        lambda: (
            described(cluster.gateway.bootstrap, GROUP)[1:3] == ("connect", SESSIONED)
            and spread(cluster.workers, SHAPE)
        ),
        90,
        cluster,
    )
    # The killed worker restarted: three classic workers, balanced.
    props = worker_properties(cluster.gateway.bootstrap, GROUP, WORKER_SETTINGS)
    back = ConnectWorker(connect_dist(), tmp_path_factory.mktemp("connect-restarted"), props)
    cluster.workers.append(back)  # stopped by the fixture
    back.wait_rest()
    final = wait_for("three classic workers, balanced", lambda: spread(cluster.workers, SHAPE), 90, cluster)
    assert set(final.values()) == {w.worker_id for w in cluster.alive()} and len(cluster.alive()) == 3
    for kind in (lambda item: item in SHAPE, lambda item: item not in SHAPE):  # connectors, tasks
        counts = [
            sum(1 for i, w in final.items() if w == worker and kind(i)) for worker in set(final.values())
        ]
        assert max(counts) - min(counts) <= 1, final
    more = [f"line {i} after the conversions" for i in range(50)]
    with cluster.input_file.open("a") as f:
        f.write("".join(f"{line}\n" for line in more))
    wait_for(
        "lines appended after the conversions in the output file",
        lambda: output_lines(cluster) >= set(more),
        60,
        cluster,
    )
    assert described(cluster.gateway.bootstrap, GROUP) == ("Stable", "connect", SESSIONED, 3)
    intervals = spans.add_to(ownership_intervals(cluster.workers))
    assert overlaps(intervals) == []
    # The SDK worker's share ran on a classic worker before it (revoked there first), and on a
    # classic worker again after it left.
    taken = {item for _, _, item in spans.spans}
    assert taken
    for item in taken:
        owners = [worker for _, _, worker in sorted(intervals[item])]
        i = owners.index(sdk_url)
        assert 0 < i < len(owners) - 1 and sdk_url not in (owners[i - 1], owners[i + 1]), (item, owners)


def test_an_eager_worker_turns_the_group_eager_which_cannot_convert(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A worker with `connect.protocol=eager` offers only `default` (ConnectProtocol v0), so the
    group falls back to it (KIP-415's downgrade): every worker then sends v0 metadata and the
    leader's EagerAssignor writes v0 assignments listing all each worker runs. They decode to the
    REST API's placement, and `check upgrade` names the eager sub-protocol as a blocker."""
    wait_for("one placement, seen by all", lambda: agreed_placement(cluster.workers, SHAPE), 90, cluster)
    props = worker_properties(
        cluster.gateway.bootstrap, GROUP, {**WORKER_SETTINGS, "connect.protocol": "eager"}
    )
    eager = ConnectWorker(connect_dist(), tmp_path_factory.mktemp("connect-eager"), props)
    cluster.workers.append(eager)  # stopped by the fixture
    eager.wait_rest()
    seen: dict[str, list[str]] = {}

    def eager_and_agreed() -> bool:
        where = agreed_placement(cluster.workers, SHAPE)
        found = stored_frames(cluster)
        if where is None or found is None or found[0] != EAGER or len(found[1]) != len(cluster.alive()):
            return False
        seen.clear()
        for m in found[1]:
            raw_metadata, raw_assignment = bytes(m.member_metadata), bytes(m.member_assignment)
            metadata, assignment = decode_metadata(raw_metadata), decode_assignment(raw_assignment)
            assert (
                encode_metadata(metadata) == raw_metadata and encode_assignment(assignment) == raw_assignment
            )
            assert metadata.version == assignment.version == 0 and assignment.revoked is None
            seen[worker_id_of(metadata.url)] = sorted(
                [*assignment.connectors, *map(task_name, assignment.tasks)]
            )
        expected = by_worker(where)
        return {w: items for w, items in seen.items() if items} == expected

    wait_for("the group on `default` with v0 frames matching the placement", eager_and_agreed, 90, cluster)
    assert eager.worker_id in seen
    (verdict,) = check_upgrade(cluster.gateway.bootstrap, GROUP)
    assert verdict["verdict"] == "NOT-READY"
    assert "eager protocol" in verdict["reason"], verdict
    details = {d["name"]: d for d in verdict["details"]}
    assert details["connect-sub-protocol"]["status"] == "refused"
    assert "connect.protocol=sessioned" in (details["connect-sub-protocol"]["fix"] or "")
    assert details["connect-online-conversion"]["status"] == "refused"
    view = groups_json(cluster.gateway.bootstrap, "migration", GROUP)["kafka_connect"]
    assert view["protocol"] == EAGER and [b["check"] for b in view["blockers"]] == ["connect-sub-protocol"]

"""The Kafka Streams 4.4 word count the streams-group e2e tests run (e2e/java_programs/
StreamsWordCount.java: groupBy gives a repartition topic, count a changelog topic), its JVM
instances followed through their stdout, and the true counts of its input.

`three_instances_one_killed` is issue 31's real-application scenario (three instances, one
SIGKILLed and restarted on its state directory, the output equal to the true counts), run on
groupshift embedded (e2e/test_streams_groups.py), on groupshift in front of Kafka 3.9
(e2e/upstream_streams.py, from e2e/test_upstream_kafka.py) and on Kafka 4.4 itself
(e2e/test_groups_cli_streams.py). `three_instances_one_killed_mid_processing` is its
exactly-once variant (`processing.guarantee=exactly_once_v2`: the kill in the middle of a
transaction, found on the cluster with ListTransactions / DescribeTransactions and the last
stable offset), run on groupshift in front of Kafka 3.9."""

from __future__ import annotations

import collections
import json
import os
import signal
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from e2e.groups_cli import table
from harness.kafka_dist.java_clients import TOOL_JVM_OPTS
from protocol.client import WireClient, make_request

SOURCE = Path(__file__).parent / "java_programs" / "StreamsWordCount.java"
APP, INPUT, OUTPUT = "wordcount", "words-in", "counts-out"
LINES = [f"the quick brown fox {i % 7} jumps over the lazy dog {i % 3}" for i in range(300)]
ALL_TASKS = {f"{s}_{p}" for s in (0, 1) for p in range(4)}
# Input produced while an instance is down, then after it is back: old words and new ones.
WHILE_KILLED = [f"the fox {i % 5} runs while one instance is dead {i % 2}" for i in range(120)]
AFTER_RESTART = [f"the restarted dog {i % 4} counts again" for i in range(80)]


class Instance:
    """One StreamsWordCount JVM; its stdout lines (`STATE ...`, `TASKS ...`) collected."""

    def __init__(
        self,
        classpath: str,
        bootstrap: str,
        state_dir: Path,
        log: Path,
        app: str = APP,
        input_topic: str = INPUT,
        output_topic: str = OUTPUT,
        main_class: str = "StreamsWordCount",
        extra_args: tuple[str, ...] = (),
        held: bool = False,
    ) -> None:
        """`held`: the JVM starts and builds the topology, but the instance joins its group only
        at `go()` (a roll's next instance, started while the previous step settles)."""
        self.lines: list[str] = []
        self.log = log
        self.proc = subprocess.Popen(
            [
                "java",
                *TOOL_JVM_OPTS,
                "-cp",
                classpath,
                main_class,
                bootstrap,
                app,
                input_topic,
                output_topic,
                str(state_dir),
                *extra_args,
            ],
            stdout=subprocess.PIPE,
            stderr=log.open("wb"),
            stdin=subprocess.PIPE if held else None,
            env={**os.environ, "STREAMS_START_ON_STDIN": "1"} if held else None,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def go(self) -> None:
        """Let a `held` instance start (join its group)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def tasks(self) -> set[str] | None:
        """The active tasks of the last RUNNING state, None before the first."""
        found = [line for line in self.lines if line.startswith("TASKS")]
        if not found:
            return None
        return {t for t in found[-1][len("TASKS") :].strip().split(",") if t}

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def wait_for_disjoint_shares(instances: list[Instance], timeout: float) -> list[set[str]]:
    """The instances' active tasks once each has some, together all of ALL_TASKS and no task on
    two (or the last shares seen when `timeout` passes)."""
    deadline = time.monotonic() + timeout
    shares: list[set[str]] = [set() for _ in instances]
    while time.monotonic() < deadline:
        shares = [i.tasks() or set() for i in instances]
        union = set().union(*shares)
        if all(shares) and union == ALL_TASKS and sum(map(len, shares)) == len(ALL_TASKS):
            break
        time.sleep(0.5)
    return shares


def truth(lines: list[str] = LINES) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for line in lines:
        counts.update(line.split())
    return dict(counts)


def read_counts(bootstrap: str, want: dict[str, int], timeout: float, output: str = OUTPUT) -> dict[str, int]:
    """The latest count per word in the output topic, read until it equals `want` or time is up.
    Read committed: an aborted transaction's counts (exactly_once_v2) are not the output's."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "checker",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    c.assign([TopicPartition(output, p, 0) for p in range(2)])
    latest: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and latest != want:
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    latest[m.key().decode()] = struct.unpack(">q", m.value())[0]
    finally:
        c.close()
    return latest


def tasks_of(assignments: str) -> dict[str, set[str]]:
    """`ACTIVE: 0:[0,1]; 1:[2]; TARGET-ACTIVE: ...` (kafka-streams-groups.sh's ASSIGNMENTS
    column) as {kind: {"0_0", "0_1", "1_2"}}."""
    out: dict[str, set[str]] = {}
    kind = ""
    for word in assignments.replace(";", " ").split():
        if word.endswith(":") and not word[:-1].isdigit():
            kind = word[:-1]
            out.setdefault(kind, set())
            continue
        sub, _, parts = word.partition(":")
        for p in parts.strip("[]").split(","):
            if p:
                out[kind].add(f"{sub}_{p}")
    return out


def produce(bootstrap: str, topic: str, lines: list[str], tag: str) -> None:
    """`lines` appended to `topic`, keyed `tag-i`, every one acknowledged."""
    p = Producer({"bootstrap.servers": bootstrap})
    for i, line in enumerate(lines):
        p.produce(topic, key=f"{tag}-{i}", value=line)
    assert p.flush(30) == 0


def process_id(state_dir: Path, app: str) -> str:
    """The process id Kafka Streams keeps in its state directory (StateDirectory's
    `kafka-streams-process-metadata`): a restart on the same directory reuses it."""
    return str(json.loads((state_dir / app / "kafka-streams-process-metadata").read_text())["processId"])


def uncommitted(
    bootstrap: str, group: str, topics: list[str], partitions: int = 4
) -> dict[tuple[str, int], int]:
    """Per partition of `topics`, how far the group's committed offset is behind the log end
    (OffsetFetch as an admin; a partition never committed counts from 0)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tps = [TopicPartition(t, p) for t in topics for p in range(partitions)]
    found = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])[group].result(15)
    committed = {(tp.topic, tp.partition): max(tp.offset, 0) for tp in found.topic_partitions}
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets", "enable.auto.commit": False})
    try:
        ends = {(tp.topic, tp.partition): c.get_watermark_offsets(tp, timeout=15)[1] for tp in tps}
    finally:
        c.close()
    return {tp: end - committed.get(tp, 0) for tp, end in ends.items() if end != committed.get(tp, 0)}


class WordCountApp:
    """The word count against one server: instance n runs on state directory `base/state-n`,
    kept across its restarts; `stop` ends every instance still running."""

    def __init__(
        self,
        classpath: str,
        bootstrap: str,
        base: Path,
        app: str = APP,
        input_topic: str = INPUT,
        output_topic: str = OUTPUT,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        """`extra_args`: StreamsWordCount's optional arguments (processing guarantee, group
        protocol, classic session timeout)."""
        self.classpath, self.bootstrap, self.base = classpath, bootstrap, base
        self.app, self.input_topic, self.output_topic = app, input_topic, output_topic
        self.extra_args = extra_args
        self.instances: list[Instance] = []

    def state_dir(self, n: int) -> Path:
        return self.base / f"state-{n}"

    def start(self, n: int, held: bool = False) -> Instance:
        """`held`: the JVM starts, the instance joins at its `go()` (Instance)."""
        log = self.base / f"instance-{n}-{time.monotonic_ns()}.log"
        instance = Instance(
            self.classpath,
            self.bootstrap,
            self.state_dir(n),
            log,
            self.app,
            self.input_topic,
            self.output_topic,
            extra_args=self.extra_args,
            held=held,
        )
        self.instances.append(instance)
        return instance

    def stop(self) -> None:
        for instance in self.instances:
            if instance.proc.poll() is None:
                instance.stop()


def expect_disjoint_cover(
    instances: list[Instance], timeout: float, seen: Callable[[], object]
) -> list[set[str]]:
    """Each instance RUNNING with a non-empty share, the shares disjoint and together every task."""
    shares = wait_for_disjoint_shares(instances, timeout)
    context = ([i.lines[-8:] for i in instances], seen())
    assert all(shares) and set().union(*shares) == ALL_TASKS, context
    assert sum(map(len, shares)) == len(ALL_TASKS), context  # no task on two instances
    return shares


def three_instances_one_killed(
    wc: WordCountApp, produced: list[str], seen: Callable[[], object] = lambda: None
) -> list[str]:
    """Issue 31's real application, run on whatever server `wc` names: three instances share
    every task and count `produced` (already in the input topic) exactly; one is SIGKILLed (no
    leave, no last commit, its state directory left as a crash leaves it); more input is
    counted by the two left once the dead member's session expires and they take its tasks;
    it is restarted on the same state directory (the same process id), the three share every
    task again and count a last batch. The output's final count of every word equals the
    truth at each step. Returns every line the input then holds; the three instances are left
    running (in `wc.instances`) for the caller's own checks.

    Exact counts under at-least-once: the kill comes once every input and repartition record
    is committed (the application idle), so nothing is processed twice. A kill between a
    record's processing and its commit replays it, and a count replayed counts twice: that is
    at-least-once, and only `processing.guarantee=exactly_once_v2` rules it out, which needs
    transactions (groupshift embedded refuses them, docs/deviations.md)."""
    repartition = f"{wc.app}-words-repartition"
    running = [wc.start(n) for n in (1, 2, 3)]
    expect_disjoint_cover(running, 90, seen)
    want = truth(produced)
    assert read_counts(wc.bootstrap, want, 60, wc.output_topic) == want, seen()

    deadline = time.monotonic() + 30
    while behind := uncommitted(wc.bootstrap, wc.app, [wc.input_topic, repartition]):
        assert time.monotonic() < deadline, (behind, seen())
        time.sleep(0.3)
    process = process_id(wc.state_dir(1), wc.app)
    victim = running[0]
    victim.proc.kill()
    assert victim.proc.wait(10) == -signal.SIGKILL

    # Down: its session expires, the two left take its tasks and count the new input.
    produce(wc.bootstrap, wc.input_topic, WHILE_KILLED, "killed")
    produced = produced + WHILE_KILLED
    expect_disjoint_cover(running[1:], 60, seen)
    want = truth(produced)
    assert read_counts(wc.bootstrap, want, 60, wc.output_topic) == want, seen()

    # Back on its state directory: the same process, a share of its own again.
    running[0] = wc.start(1)
    expect_disjoint_cover(running, 90, seen)
    assert process_id(wc.state_dir(1), wc.app) == process
    produce(wc.bootstrap, wc.input_topic, AFTER_RESTART, "restarted")
    produced = produced + AFTER_RESTART
    want = truth(produced)
    assert read_counts(wc.bootstrap, want, 60, wc.output_topic) == want, seen()
    return produced


# Input produced in small batches while one instance is killed in the middle of processing it.
FLOWING = [f"the stream {i % 6} keeps flowing past the kill {i % 4}" for i in range(800)]


class Feeder:
    """`lines` appended to `topic` from a thread, `batch` at a time with `pause` seconds between
    batches, each batch acknowledged; `sent` counts the acknowledged lines."""

    def __init__(self, bootstrap: str, topic: str, lines: list[str], tag: str, batch: int, pause: float):
        self.sent = 0
        self.error: BaseException | None = None
        self._args = (bootstrap, topic, lines, tag, batch, pause)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        bootstrap, topic, lines, tag, batch, pause = self._args
        try:
            p = Producer({"bootstrap.servers": bootstrap})
            for start in range(0, len(lines), batch):
                for i, line in enumerate(lines[start : start + batch], start):
                    p.produce(topic, key=f"{tag}-{i}", value=line)
                assert p.flush(30) == 0
                self.sent = min(start + batch, len(lines))
                time.sleep(pause)
        except BaseException as e:  # reported by join()
            self.error = e

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive() and self.error is None, (self.sent, self.error)


def count_records(bootstrap: str, topic: str, partitions: int, isolation: str) -> int:
    """How many records `topic` holds as a consumer with `isolation` reads it (read_uncommitted
    also returns the records of aborted transactions; neither returns transaction markers)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "record-counter",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen, done = 0, set()
    deadline = time.monotonic() + 30
    try:
        while len(done) < partitions and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    seen += 1
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    done.add(m.partition())
    finally:
        c.close()
    assert len(done) == partitions, (topic, isolation, done)
    return seen


def open_transactions(cluster: str, prefix: str) -> dict[str, tuple[str, int, set[str]]]:
    """The transactions of transactional ids starting with `prefix` on the Kafka cluster at
    `cluster` (HOST:PORT of one broker), asked of every broker (each coordinates its own:
    ListTransactions, then DescribeTransactions): id -> (state, producer epoch, topics)."""
    host, port = cluster.split(",")[0].rsplit(":", 1)
    with WireClient(int(port), host=host, timeout=15) as c:
        md = c.request(
            make_request(
                3, 12, topics=[], allow_auto_topic_creation=False, include_topic_authorized_operations=False
            )
        )
    out: dict[str, tuple[str, int, set[str]]] = {}
    for b in md.brokers:
        with WireClient(int(b.port), host=str(b.host), timeout=15) as c:
            listed = c.request(make_request(66, 0, state_filters=[], producer_id_filters=[]))
            ids = [
                str(t.transactional_id)
                for t in listed.transaction_states
                if str(t.transactional_id).startswith(prefix)
            ]
            if not ids:
                continue
            described = c.request(make_request(65, 0, transactional_ids=ids))
        for t in described.transaction_states:
            if int(t.error_code) == 0:
                topics = {str(d.topic) for d in t.topics}
                out[str(t.transactional_id)] = (str(t.transaction_state), int(t.producer_epoch), topics)
    return out


def freeze_in_open_transaction(
    victim: Instance, cluster: str, prefix: str, changelog: str, feeder: Feeder, timeout: float
) -> dict[str, object]:
    """SIGSTOP the victim at a moment it has processed records it has not committed: one of its
    transactions (ids starting with `prefix`) is open, and records of it lie in the changelog
    partition of one of its own count tasks (1_p writes changelog partition p, and only its
    owner writes there: the partition's last stable offset is below its high watermark), while
    `feeder` is still appending input; else SIGCONT and try again a moment later. Frozen, the
    process sends nothing more (what it had sent has landed after a short wait), so those
    records stay in an open transaction until the caller's SIGKILL: the kill comes in the
    middle of processing, not at a committed quiet point. Returns what was seen: the open
    transactions and, per changelog partition, (last stable offset, high watermark)."""
    readers = {
        iso: Consumer({"bootstrap.servers": cluster, "group.id": f"watermarks-{iso}", "isolation.level": iso})
        for iso in ("read_committed", "read_uncommitted")
    }
    deadline = time.monotonic() + timeout
    try:
        while True:
            assert time.monotonic() < deadline and feeder.sent < len(FLOWING), (
                feeder.sent,
                victim.lines[-5:],
            )
            os.kill(victim.proc.pid, signal.SIGSTOP)
            time.sleep(0.3)  # requests already sent reach the brokers
            # its count tasks as last reported (a rebalance may have moved them)
            own = sorted(int(t.split("_")[1]) for t in victim.tasks() or () if t.startswith("1_"))
            marks = {
                p: tuple(
                    readers[iso].get_watermark_offsets(
                        TopicPartition(changelog, p), timeout=10, cached=False
                    )[1]
                    for iso in ("read_committed", "read_uncommitted")
                )
                for p in own
            }
            txns = {tid: v for tid, v in open_transactions(cluster, prefix).items() if v[0] == "Ongoing"}
            if txns and any(stable < high for stable, high in marks.values()):
                return {"transactions": txns, "changelog": marks}
            os.kill(victim.proc.pid, signal.SIGCONT)
            time.sleep(0.2)
    finally:
        for r in readers.values():
            r.close()


def three_instances_one_killed_mid_processing(
    wc: WordCountApp, cluster: str, produced: list[str], seen: Callable[[], object] = lambda: None
) -> tuple[list[str], dict[str, object]]:
    """The exactly-once variant of `three_instances_one_killed` (`wc` started with
    `processing.guarantee=exactly_once_v2`; `cluster`: a broker of the Kafka cluster holding
    the transactions): the SIGKILL comes in the middle of processing, while a feeder is still
    appending input and one of the victim's transactions is open with records of its counts
    (`freeze_in_open_transaction`). That transaction must be aborted by the cluster (its
    timeout; the state is checked, and the counts read again after it), and the victim's tasks
    replayed by the two left from the last committed offsets: every count read committed
    equals the truth after the kill and after the restart. Returns every line the input then
    holds and what the kill cut (`freeze_in_open_transaction`); the instances are left running."""
    began = time.monotonic()
    phases: dict[str, float] = {}

    def phase(name: str) -> None:
        phases[name] = round(time.monotonic() - began - sum(phases.values()), 1)

    running = [wc.start(n) for n in (1, 2, 3)]
    expect_disjoint_cover(running, 90, seen)
    phase("three running")
    want = truth(produced)
    assert read_counts(wc.bootstrap, want, 60, wc.output_topic) == want, seen()

    # The victim must own a count task (1_p): the open transaction `freeze_in_open_transaction`
    # waits for has records in its count changelog, which an instance running only 0_p tasks
    # (the sticky assignor balances task counts, not subtopologies) never writes.
    counting = [i for i, r in enumerate(running) if any(t.startswith("1_") for t in r.tasks() or ())]
    assert counting, ([r.tasks() for r in running], seen())
    v = counting[0]
    victim = running[v]
    process = process_id(wc.state_dir(v + 1), wc.app)
    prefix = f"{wc.app}-{process}-"
    feeder = Feeder(wc.bootstrap, wc.input_topic, FLOWING, "flowing", batch=10, pause=0.1)
    while feeder.sent < len(FLOWING) // 5:
        time.sleep(0.05)
    cut = freeze_in_open_transaction(victim, cluster, prefix, f"{wc.app}-counts-changelog", feeder, 30)
    phase("counted, then frozen mid-transaction")
    victim.proc.kill()
    assert victim.proc.wait(10) == -signal.SIGKILL
    assert feeder.sent < len(FLOWING), "the input stopped flowing before the kill"
    feeder.join(60)
    produced = produced + FLOWING

    # Down: its session expires and the cluster aborts its transaction at the timeout; the two
    # left replay its tasks from their committed offsets and count every line exactly once.
    expect_disjoint_cover([r for r in running if r is not victim], 90, seen)
    phase("two running after the kill")
    want = truth(produced)
    assert read_counts(wc.bootstrap, want, 90, wc.output_topic) == want, seen()
    phase("counted exactly")
    # The cut transaction is aborted by the cluster (at its timeout), its producer epoch
    # bumped: its records are never read committed.
    cut_txns = cut["transactions"]
    assert isinstance(cut_txns, dict)
    deadline = time.monotonic() + 30
    while True:
        after = open_transactions(cluster, prefix)
        aborted = all(after[t][0] == "CompleteAbort" and after[t][1] > v[1] for t, v in cut_txns.items())
        if aborted:
            break
        assert time.monotonic() < deadline, (cut, after)
        time.sleep(0.5)
    assert read_counts(wc.bootstrap, want, 30, wc.output_topic) == want, seen()
    phase("aborted")

    # Back on its state directory (the same process id, so the same transactional ids).
    running[v] = wc.start(v + 1)
    expect_disjoint_cover(running, 90, seen)
    phase("three running after the restart")
    assert process_id(wc.state_dir(v + 1), wc.app) == process
    produce(wc.bootstrap, wc.input_topic, AFTER_RESTART, "restarted")
    produced = produced + AFTER_RESTART
    want = truth(produced)
    assert read_counts(wc.bootstrap, want, 60, wc.output_topic) == want, seen()
    phase("counted exactly again")
    return produced, {**cut, "seconds": phases}


def described_members(
    jars: str, bootstrap: str, app: str, timeout: float = 30
) -> tuple[list[dict[str, str]], str]:
    """Kafka 4.4's `kafka-streams-groups.sh --describe --members --verbose` (StreamsGroupCommand,
    from the kafka-tools jar in `jars`) of `app`: its member rows and its whole output, once
    every member has reached its target tasks, standbys included (or when `timeout` passes)."""
    deadline = time.monotonic() + timeout
    while True:
        described = subprocess.run(
            [
                "java",
                *TOOL_JVM_OPTS,
                "-cp",
                jars,
                "org.apache.kafka.tools.streams.StreamsGroupCommand",
                "--bootstrap-server",
                bootstrap,
                "--describe",
                "--group",
                app,
                "--members",
                "--verbose",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert described.returncode == 0, described.stderr[-2000:]
        rows = [r for r in table(described.stdout) if r.get("GROUP") == app]
        tasks = [tasks_of(r["ASSIGNMENTS"]) for r in rows]
        settled = all(
            t.get("ACTIVE") == t.get("TARGET-ACTIVE") and t.get("STANDBY") == t.get("TARGET-STANDBY")
            for t in tasks
        )
        if (rows and settled) or time.monotonic() > deadline:
            return rows, described.stdout
        time.sleep(1)


def check_three_members_with_standbys(rows: list[dict[str, str]], text: str, restarted_process: str) -> None:
    """The describe rows after `three_instances_one_killed` with one standby replica per
    stateful task: three streams-protocol members on three processes (the restarted instance
    under the process id its state directory kept), their active tasks disjoint and together
    every task, and each stateful task (subtopology 1, the count) with exactly one standby, on
    a member that does not run it; the stateless subtopology (0) with none."""
    assert len(rows) == 3, text
    tasks = [tasks_of(r["ASSIGNMENTS"]) for r in rows]
    for r in rows:
        assert r["MEMBER-PROTOCOL"] == "streams" and "ACTIVE:" in r["ASSIGNMENTS"], text
    actives = [t.get("ACTIVE", set()) for t in tasks]
    assert set().union(*actives) == ALL_TASKS and sum(map(len, actives)) == len(ALL_TASKS), text
    processes = {r["PROCESS"] for r in rows}
    assert len(processes) == 3 and restarted_process in processes, text
    stateful = {f"1_{p}" for p in range(4)}
    standbys: list[str] = []
    for t in tasks:
        standby = t.get("STANDBY", set())
        assert standby <= stateful and not standby & t.get("ACTIVE", set()), text
        standbys += sorted(standby)
    assert sorted(standbys) == sorted(stateful), text
    assert "STANDBY: 0:[" not in text, text

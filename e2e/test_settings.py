"""Settings and start-up that can't hurt, as an operator meets them on the command line.

Every rule is checked on a real `groupshift` process: a bad setting (a wrong assignor name
included) stops `serve` before it listens, with one clear line naming the file and line or the
flag, no usage block and no traceback; a Kafka `server.properties` is taken as is, with one
warning listing the Kafka keys groupshift does not use; a data directory that is a file or
someone else's is refused; output piped into `head` ends quietly; `records dump` finds a
group's shard from the data directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from e2e.harness import REPO, GatewayProcess

# The keys of the KRaft `config/server.properties` that Kafka 4.x ships (values as shipped,
# comments dropped), i.e. what an operator copies from an existing broker.
KAFKA_SERVER_PROPERTIES = """\
############################# Server Basics #############################
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
############################# Socket Server Settings #############################
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def groupshift(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "groupshift", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def serve(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`serve` that is expected to refuse to start (a timeout here means it started)."""
    return groupshift("serve", "--listen", "127.0.0.1:0", "--data-dir", str(data_dir), *args, timeout=30)


def assert_clean_error(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and "usage:" not in done.stderr, done.stderr
    assert "gateway.listening" not in done.stderr
    for text in expected:
        assert text in done.stderr, done.stderr


def test_an_unknown_assignor_stops_the_server_with_one_clear_line(tmp_path: Path) -> None:
    done = serve(tmp_path / "data", "--set", "group.consumer.assignors=uniform,sticky")
    assert_clean_error(
        done,
        "groupshift serve: error: --set group.consumer.assignors: group.consumer.assignors: "
        "unknown assignor 'sticky' (known: uniform, range)",
    )
    assert len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "data").exists()  # refused before anything was created


def test_config_file_errors_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=2\n# comment\nlog.retention.hourz=3\ngroup.max.size=zero\n")
    done = serve(tmp_path / "data", "--config", str(path))
    assert_clean_error(
        done,
        f"groupshift serve: error: {path}:3: unknown configuration key 'log.retention.hourz'",
        "(did you mean 'log.retention.hours'?)",
    )
    path.write_text("num.partitions=2\ngroup.max.size=zero\n")
    assert_clean_error(
        serve(tmp_path / "data", "--config", str(path)),
        f"groupshift serve: error: {path}:2: group.max.size: Input should be a valid integer",
    )


def test_a_kafka_server_properties_is_accepted_with_one_warning(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(KAFKA_SERVER_PROPERTIES)
    # --listen and --data-dir win over the file's listeners and log.dirs (later sources win).
    gw = GatewayProcess.start(tmp_path / "data", extra_args=("--config", str(path)))
    try:
        warnings = gw.events("config.kafka_keys_ignored")
        assert len(warnings) == 1 and warnings[0]["level"] == "warning"
        ignored = warnings[0]["keys"]
        assert "process.roles" in ignored and "log.retention.hours" in ignored
        assert "num.partitions" not in ignored and "log.segment.bytes" not in ignored
        # The 24 keys less the 9 groupshift uses: since the listeners work (gateway.listeners)
        # listener.security.protocol.map and controller.listener.names are read, and
        # advertised.listeners went with the file's listeners that `--listen` replaced.
        assert len(ignored) == 15
        assert not {"advertised.listeners", "listener.security.protocol.map"} & set(ignored)
        admin = KafkaAdminClient(bootstrap_servers=gw.bootstrap, request_timeout_ms=10000)
        try:
            admin.create_topics([NewTopic("t", 1, 1)])
            assert "t" in admin.list_topics()
        finally:
            admin.close()
    finally:
        assert gw.stop() == 0


def test_a_data_directory_that_is_a_file_or_someone_elses_is_refused(tmp_path: Path) -> None:
    a_file = tmp_path / "data"
    a_file.write_text("not a directory")
    assert_clean_error(serve(a_file), f"data directory {a_file} (log.dirs / --data-dir) is a file")
    home = tmp_path / "home"
    (home / "projects-1").mkdir(parents=True)
    (home / ".bashrc").write_text("")
    assert_clean_error(
        serve(home),
        f"data directory {home} is not empty and is not a groupshift data directory",
        "pass --force-data-dir to use this one anyway",
    )
    assert sorted(os.listdir(home)) == [".bashrc", "projects-1"]  # untouched
    shards = ("offsets.topic.num.partitions=3",)
    gw = GatewayProcess.start(home, sets=shards, extra_args=("--force-data-dir",))
    assert gw.stop() == 0
    again = GatewayProcess.start(home, sets=shards)  # now a groupshift data directory
    assert again.stop() == 0
    assert_clean_error(
        serve(home, "--set", "offsets.topic.num.partitions=10"),
        "offsets.topic.num.partitions=10 but data directory",
        "holds 3 coordinator logs",
    )


def test_help_is_for_users_and_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    helped = groupshift("--help")
    assert helped.returncode == 0
    assert "lazily" not in helped.stdout and "stays instant" not in helped.stdout
    assert "consumer groups" in helped.stdout
    serve_help = groupshift("serve", "--help").stdout
    assert "--force-data-dir" in serve_help and "--config FILE" in serve_help
    for cmd in (
        "simulate --scenario random --steps 3000",
        "--help",
        "serve --help",
        "records dump --help",
    ):
        piped = subprocess.run(
            f"{sys.executable} -m groupshift {cmd} | head -c 10",
            shell=True,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert len(piped.stdout) == 10, cmd
        assert piped.stderr == "", (cmd, piped.stderr)


def test_the_installed_script_runs_the_chaos_simulator_from_any_directory(tmp_path: Path) -> None:
    """The console script (not `python -m`, which puts the working directory on sys.path)
    imports the simulator (sim/, a package of the wheel), wherever it is run from."""
    script = Path(sys.executable).parent / "groupshift"
    assert script.is_file(), f"{script}: the project is installed with its console script (pip install -e)"
    ran = subprocess.run(
        [str(script), "simulate", "--chaos", "--seed", "11", "--steps", "21"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert "41 steps run, 0 violations" in ran.stdout, ran.stdout


def test_records_dump_finds_a_groups_shard_from_the_data_directory(tmp_path: Path) -> None:
    gw = GatewayProcess.start(
        tmp_path / "data", sets=("coordinator.fsync.policy=none", "offsets.topic.num.partitions=5")
    )
    groups = ["billing", "audit", "search"]
    try:
        admin = KafkaAdminClient(bootstrap_servers=gw.bootstrap, request_timeout_ms=10000)
        admin.create_topics([NewTopic("orders", 2, 1)])
        admin.close()
        for group in groups:
            consumer = KafkaConsumer(bootstrap_servers=gw.bootstrap, group_id=group, enable_auto_commit=False)
            consumer.commit({TopicPartition("orders", 0): OffsetAndMetadata(5, "", -1)})
            consumer.close()
    finally:
        assert gw.stop() == 0
    data = tmp_path / "data"
    for path in (data, data / "coordinator"):
        done = groupshift("records", "dump", "--json", "--group", "audit", str(path))
        assert done.returncode == 0, done.stderr
        entries = [json.loads(line) for line in done.stdout.splitlines()]
        assert [e["type"] for e in entries] == ["OffsetCommit"]
        assert entries[0]["key"] == {"group": "audit", "topic": "orders", "partition": 0}
        assert entries[0]["value"]["offset"] == 5
    everything = groupshift("records", "dump", str(data))
    assert everything.returncode == 0, everything.stderr
    assert sum(line.startswith("log: __consumer_offsets-") for line in everything.stdout.splitlines()) == 5
    assert sum(" type: OffsetCommit " in line for line in everything.stdout.splitlines()) == 3
    piped = subprocess.run(
        f"{sys.executable} -m groupshift records dump {data} | head -n 1",
        shell=True,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert piped.stdout == "log: __consumer_offsets-0\n" and piped.stderr == ""


def test_the_server_compacts_its_coordinator_log_and_restarts_to_the_same_offsets(tmp_path: Path) -> None:
    sets = (
        "offsets.topic.num.partitions=1",
        "coordinator.compaction.min.bytes=8192",
        "coordinator.fsync.policy=none",
    )
    gw = GatewayProcess.start(tmp_path / "data", sets=sets)
    log_dir = tmp_path / "data" / "coordinator" / "__consumer_offsets-0"
    commits = 120  # of all 6 partitions each
    try:
        admin = KafkaAdminClient(bootstrap_servers=gw.bootstrap, request_timeout_ms=10000)
        admin.create_topics([NewTopic("orders", 6, 1)])
        consumer = KafkaConsumer(bootstrap_servers=gw.bootstrap, group_id="billing", enable_auto_commit=False)
        largest = 0
        # Four rounds of 30 commits (about 12 KB each, past the 8 KB minimum). Compaction runs
        # beside the commits, so a fast client could outrun it on a busy machine; the test waits
        # for each round's compaction before the next, as an operator's steady load would allow.
        for round_ in range(4):
            for i in range(round_ * 30, round_ * 30 + 30):
                consumer.commit(
                    {TopicPartition("orders", p): OffsetAndMetadata(i, f"m{i}", -1) for p in range(6)}
                )
                if i % 10 == 0:
                    size = sum(f.stat().st_size for f in log_dir.iterdir() if f.suffix == ".log")
                    largest = max(largest, size)
            deadline = time.monotonic() + 30
            while len(gw.events("coordinator.compacted")) <= round_ and time.monotonic() < deadline:
                time.sleep(0.05)
        consumer.close()
        before = admin.list_group_offsets("billing")
        admin.close()
        compacted = gw.events("coordinator.compacted")
        assert len(compacted) >= 4, gw.log_tail()
        assert largest < 4 * 8192  # 720 offsets committed take about 48 KB uncompacted
    finally:
        assert gw.stop() == 0
    again = gw.restart()
    try:
        admin = KafkaAdminClient(bootstrap_servers=again.bootstrap, request_timeout_ms=10000)
        after = admin.list_group_offsets("billing")
        admin.close()
    finally:
        assert again.stop() == 0
    assert after == before
    offsets = {tp.partition: (om.offset, om.metadata) for tp, om in after["billing"].items()}
    assert offsets == {p: (commits - 1, f"m{commits - 1}") for p in range(6)}

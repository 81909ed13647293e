"""Real distributed Kafka Connect workers (`org.apache.kafka.connect.cli.ConnectDistributed`,
what `connect-distributed.sh` runs) from the cached `connect` component (maven.py:
`connect-runtime` and `connect-file`), against any bootstrap address: groupshift or a Kafka.

A distributed worker joins a classic group with protocol type `connect` (Connect's
`WorkerCoordinator`, an `AbstractCoordinator`), offering the sub-protocols its
`connect.protocol` allows (`sessioned` by default since 2.4: KIP-507's
IncrementalCooperativeConnectProtocol v2; `compatible` v1; `eager` v0's ConnectProtocol); the
leader assigns connectors and tasks with Connect's IncrementalCooperativeAssignor. It keeps its
connector configs, source offsets and statuses in three compacted topics it creates itself, and
serves the REST API (`/connectors`, `/connectors/<name>/status`) on `listeners`.

`ConnectWorker` starts one JVM with a properties file written here (REST on an ephemeral
127.0.0.1 port, read back from the RestServer's "advertising URL" log line) and logs to a file
at the levels `CONNECT_LOG4J2` (Kafka 4's log4j2) or `CONNECT_LOG4J1` (Kafka 3's reload4j) set:
WARN, and INFO for the lines this harness reads — the REST
URL, the herder's "Joined group ... got assignment" lines, and the Worker's "Creating task" /
"Stopping task" / "Creating connector" / "Stopping connector" lines, timestamped in epoch ms so
that the lines of several workers on one host form one timeline (`ownership_intervals`).
"""

from __future__ import annotations

import datetime
import itertools
import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.kafka_dist.java_clients import TOOL_JVM_OPTS
from harness.kafka_dist.maven import KafkaDist, resolve_component

#: The JVM of a worker: the tools' small heap and C1-only JIT (a worker runs seconds, not days),
#: plus the JDK's class-data archive when there is one.
WORKER_JVM_OPTS = (*TOOL_JVM_OPTS, "-Xshare:auto")

CONNECT_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{UNIX_MILLIS}} %p [%t] %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRefs = file
rootLogger.appenderRef.file.ref = FILE
logger.rest.name = org.apache.kafka.connect.runtime.rest.RestServer
logger.rest.level = info
logger.worker.name = org.apache.kafka.connect.runtime.Worker
logger.worker.level = info
logger.herder.name = org.apache.kafka.connect.runtime.distributed.DistributedHerder
logger.herder.level = info
"""

#: The same for Kafka 3.x workers (reload4j): log4j 1 has no epoch-ms date, so the time is UTC
#: (`-Duser.timezone=UTC` on the worker) to the millisecond, read back as epoch ms.
CONNECT_LOG4J1 = """\
log4j.rootLogger=WARN, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=%d{{yyyy-MM-dd HH:mm:ss.SSS}} %p [%t] %m (%c)%n
log4j.logger.org.apache.kafka.connect.runtime.rest.RestServer=INFO
log4j.logger.org.apache.kafka.connect.runtime.Worker=INFO
log4j.logger.org.apache.kafka.connect.runtime.distributed.DistributedHerder=INFO
"""

_REST_URL = re.compile(r"advertising URL (http://[^/\s]+)")
_LINE = re.compile(r"^(\d{13}|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) \S+ \[[^\]]*\] (.*)$")


def log_time_ms(stamp: str) -> int:
    """A log line's time: epoch ms (log4j2's UNIX_MILLIS) or a UTC date to the ms (reload4j)."""
    if stamp.isdigit():
        return int(stamp)
    when = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=datetime.UTC)
    return round(when.timestamp() * 1000)


_EVENTS = {
    "Creating task ": "start",
    "Stopping task ": "stop",
    "Creating connector ": "start",
    "Stopping connector ": "stop",
}


class ConnectError(RuntimeError):
    """A worker did not start, or its REST API answered with an error."""


#: The newest Connect release whose FileStream connectors Maven Central publishes (no
#: `connect-file` 4.4.0 there; maven.py, "connect"). Connect's group protocol (protocol type
#: `connect`, sub-protocols eager/compatible/sessioned) is the same in 4.3 and 4.4.
CONNECT_RELEASE = "4.3.1"


def connect_dist(spec: str = CONNECT_RELEASE) -> KafkaDist:
    """The Connect worker's jars for a Kafka release (fetched once into the user cache)."""
    return resolve_component(spec, "connect")


def worker_properties(bootstrap: str, group: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A distributed worker's settings for a small test cluster: one replica per internal topic,
    String converters (records are lines of text), and Connect's protocol defaults otherwise
    (`connect.protocol=sessioned`), unless `extra` overrides them."""
    props = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "listeners": "http://127.0.0.1:0",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "config.storage.topic": f"{group}-configs",
        "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status",
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "offset.storage.partitions": "3",
        "status.storage.partitions": "3",
        "offset.flush.interval.ms": "1000",
        "connect.protocol": "sessioned",
        # the connectors are on the classpath with ServiceLoader manifests: no class scan
        "plugin.discovery": "service_load",
    }
    props.update(extra or {})
    return props


@dataclass
class Event:
    """One line of a worker's log this harness reads: `kind` start or stop of `item` (a
    connector name or a task id `name-N`) at `ms` (epoch milliseconds)."""

    ms: int
    kind: str
    item: str


class ConnectWorker:
    """One distributed Connect worker JVM."""

    def __init__(self, dist: KafkaDist, workdir: Path, properties: dict[str, str]) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.log = workdir / "worker.log"
        config = workdir / "log4j2.properties"
        config.write_text(CONNECT_LOG4J2.format(log=self.log))
        config1 = workdir / "log4j.properties"
        config1.write_text(CONNECT_LOG4J1.format(log=self.log))
        props = workdir / "worker.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
        self.killed_ms: int | None = None
        self.exited_ms: int | None = None  # when stop() saw it exit
        self.url = ""
        with open(workdir / "stdout.log", "wb") as out:
            self.proc = subprocess.Popen(
                [
                    "java",
                    *WORKER_JVM_OPTS,
                    f"-Dlog4j2.configurationFile={config}",
                    f"-Dlog4j.configuration=file:{config1}",
                    "-Duser.timezone=UTC",
                    "-cp",
                    dist.classpath,
                    "org.apache.kafka.connect.cli.ConnectDistributed",
                    str(props),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def wait_rest(self, timeout: float = 90.0) -> str:
        """The worker's REST URL once its REST server listens (its log says where)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = _REST_URL.search(self.log_text())
            if found:
                self.url = found.group(1).rstrip("/")
                return self.url
            if self.proc.poll() is not None:
                raise ConnectError(
                    f"worker exited {self.proc.returncode} before its REST server:\n{self.tail()}"
                )
            time.sleep(0.2)
        raise ConnectError(f"no REST server after {timeout:.0f}s:\n{self.tail()}")

    @property
    def worker_id(self) -> str:
        """What the status API names this worker by: its advertised host:port."""
        return self.url.split("://", 1)[1]

    def tail(self, lines: int = 30) -> str:
        text = self.log_text() + (self.workdir / "stdout.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def rest(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        """One REST call; the decoded JSON answer (None for an empty one). ConnectError on an
        HTTP error, with Connect's error message."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as exc:
            raise ConnectError(
                f"{method} {path}: HTTP {exc.code} {exc.read().decode(errors='replace')}"
            ) from exc
        except (urllib.error.URLError, OSError) as exc:
            raise ConnectError(f"{method} {path}: {exc}") from exc
        return json.loads(raw) if raw else None

    def events(self) -> list[Event]:
        """The starts and stops of connectors and tasks in this worker's log, in order."""
        out: list[Event] = []
        for line in self.log_text().splitlines():
            m = _LINE.match(line)
            if not m:
                continue
            message = m.group(2)
            for prefix, kind in _EVENTS.items():
                if message.startswith(prefix):
                    item = message[len(prefix) :].split(" ", 1)[0]
                    out.append(Event(log_time_ms(m.group(1)), kind, item))
        return out

    def kill(self) -> None:
        """SIGKILL: no leave, no task stopped; the group sees the worker only when its session
        times out."""
        if self.proc.poll() is None:
            self.killed_ms = int(time.time() * 1000)
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (a clean shutdown: tasks stopped, group left), SIGKILL after `timeout`."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.exited_ms is None:
            self.exited_ms = int(time.time() * 1000)
        return self.proc.returncode


def ownership_intervals(workers: list[ConnectWorker]) -> dict[str, list[tuple[int, int, str]]]:
    """Per connector or task, the intervals `(from_ms, to_ms, worker_id)` during which a worker
    ran it, from the workers' logs: from its "Creating" line to its "Stopping" line, or to the
    worker's SIGKILL or exit (a stopped worker runs nothing), or to now if it still runs."""
    now = int(time.time() * 1000)
    out: dict[str, list[tuple[int, int, str]]] = {}
    for w in workers:
        open_: dict[str, int] = {}
        for e in w.events():
            if e.kind == "start":
                open_.setdefault(e.item, e.ms)
            elif e.item in open_:
                out.setdefault(e.item, []).append((open_.pop(e.item), e.ms, w.worker_id))
        end = next((ms for ms in (w.killed_ms, w.exited_ms) if ms is not None), now)
        for item, began in open_.items():
            out.setdefault(item, []).append((began, end, w.worker_id))
    return out


def overlaps(intervals: dict[str, list[tuple[int, int, str]]]) -> list[str]:
    """Connectors or tasks run by two workers at once (two intervals that intersect)."""
    found: list[str] = []
    for item, spans in intervals.items():
        spans = sorted(spans)
        for (a0, a1, wa), (b0, b1, wb) in itertools.pairwise(spans):
            if b0 < a1 and wa != wb:
                found.append(f"{item}: {wa} [{a0}, {a1}] and {wb} [{b0}, {b1}]")
    return found


# -- a small cluster's connectors and what the workers agree on (e2e/test_connect_runtime.py,
# -- the matrix's Connect family: harness/matrix/connect_scenario.py) ---------------------------

#: Connect's worker settings for a quick test: a dead worker is noticed after 6 s (groupshift's
#: minimum session) and its work is held for it 2 s, not Connect's default 5 min. The sink tasks'
#: consumers (`consumer.` prefix: the group `connect-<sink>`) likewise: a dead worker's sink
#: consumer would otherwise keep its partitions for the consumer's default 45 s session.
QUICK_SETTINGS = {
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "1000",
    "scheduled.rebalance.max.delay.ms": "2000",
    "consumer.session.timeout.ms": "6000",
    "consumer.heartbeat.interval.ms": "1000",
}
SOURCE, SINK = "lines-in", "lines-out"
#: Tasks per connector: FileStreamSource runs one whatever tasks.max says (it reads one file);
#: the sink one per partition of a three-partition topic.
SHAPE = {SOURCE: 1, SINK: 3}


def file_connectors(input_file: Path, output_file: Path, topic: str) -> dict[str, dict[str, str]]:
    """The two connectors' configs by name: `SOURCE` writes the lines of `input_file` to `topic`,
    `SINK` (`tasks.max=3`) writes `topic` to `output_file`."""
    return {
        SOURCE: {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "tasks.max": "3",
            "file": str(input_file),
            "topic": topic,
        },
        SINK: {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "3",
            "file": str(output_file),
            "topics": topic,
        },
    }


def every_item(shape: dict[str, int]) -> set[str]:
    """Every connector and task id (`name-N`) of connectors with `shape[name]` tasks."""
    return {*shape, *(f"{name}-{t}" for name, n in shape.items() for t in range(n))}


def alive(workers: list[ConnectWorker]) -> list[ConnectWorker]:
    return [w for w in workers if w.proc.poll() is None]


def placement(status: dict[str, Any]) -> dict[str, str]:
    """A connector's status as {connector or task id: worker id}, RUNNING ones only; {} if any
    is not RUNNING."""
    out: dict[str, str] = {}
    parts = [(status["name"], status["connector"])]
    parts += [(f"{status['name']}-{t['id']}", t) for t in status["tasks"]]
    for item, state in parts:
        if state["state"] != "RUNNING":
            return {}
        out[item] = state["worker_id"]
    return out


def agreed_placement(workers: list[ConnectWorker], tasks: dict[str, int]) -> dict[str, str] | None:
    """The placement of every connector and task if every live worker's status API (read from
    the status topic each worker follows) shows the same one, with `tasks[name]` tasks per
    connector, all RUNNING on live workers; else None. ConnectError if a REST call fails."""
    live = alive(workers)
    views = []
    for w in live:
        view: dict[str, str] = {}
        for name, count in tasks.items():
            status = w.rest("GET", f"/connectors/{name}/status")
            if len(status["tasks"]) != count:
                return None
            found = placement(status)
            if not found:
                return None
            view.update(found)
        views.append(view)
    if not views or any(v != views[0] for v in views):
        return None
    if not set(views[0].values()) <= {w.worker_id for w in live}:
        return None
    return views[0]


def spread(workers: list[ConnectWorker], tasks: dict[str, int]) -> dict[str, str] | None:
    """The agreed placement once every live worker holds part of it."""
    found = agreed_placement(workers, tasks)
    return found if found and set(found.values()) == {w.worker_id for w in alive(workers)} else None


def running_now(workers: list[ConnectWorker]) -> dict[str, set[str]]:
    """What each live worker runs now, from its log (an interval still open)."""
    now = int(time.time() * 1000)
    out: dict[str, set[str]] = {}
    live = {w.worker_id for w in alive(workers)}
    for item, spans in ownership_intervals(workers).items():
        for _, end, worker in spans:
            if end >= now and worker in live:
                out.setdefault(worker, set()).add(item)
    return out


class SdkSpans:
    """What an SDK worker (connect_worker/) ran when, from its callbacks: the SDK side of
    `ownership_intervals`. `assigned` / `revoked` are its `on_assigned` / `on_revoked` and
    `on_lost` callbacks (called on its thread; a dict update and a list append each)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.open: dict[str, int] = {}  # item -> since (epoch ms)
        self.spans: list[tuple[int, int, str]] = []  # (from_ms, to_ms, item)

    def assigned(self, connectors: frozenset[str], tasks: frozenset[tuple[str, int]]) -> None:
        now = int(time.time() * 1000)
        for item in [*connectors, *(f"{c}-{t}" for c, t in tasks)]:
            self.open.setdefault(item, now)

    def revoked(self, connectors: frozenset[str], tasks: frozenset[tuple[str, int]]) -> None:
        now = int(time.time() * 1000)
        for item in [*connectors, *(f"{c}-{t}" for c, t in tasks)]:
            if item in self.open:
                self.spans.append((self.open.pop(item), now, item))

    def left(self) -> None:
        """The worker left the group: what it still ran ends now."""
        now = int(time.time() * 1000)
        for item, began in self.open.items():
            self.spans.append((began, now, item))
        self.open.clear()

    def add_to(
        self, intervals: dict[str, list[tuple[int, int, str]]]
    ) -> dict[str, list[tuple[int, int, str]]]:
        """`intervals` (ownership_intervals' shape) with this worker's spans added."""
        for began, ended, item in self.spans:
            intervals.setdefault(item, []).append((began, ended, self.url))
        return intervals


def sdk_worker(bootstrap: str, group: str, spans: SdkSpans, tasks: dict[str, int]) -> Any:
    """An SDK worker (connect_worker.ConnectWorker) of `group` given the cluster's connectors and
    task counts (`tasks`), its callbacks recording into `spans`. Joining a classic Connect group
    it converts it to a connect group (docs/connect-groups.md, "Conversion with a real Connect
    cluster"); run it with connect_worker.ConnectWorkerThread."""
    from connect_worker import ConnectorConfig, IncrementalCooperativeAssignor
    from connect_worker import ConnectWorker as SdkWorker

    return SdkWorker(
        bootstrap,
        group,
        spans.url,
        [IncrementalCooperativeAssignor(ConnectorConfig(1, dict(tasks)))],
        config_offset=1,
        on_assigned=spans.assigned,
        on_revoked=spans.revoked,
        on_lost=spans.revoked,
    )


def converted_placement(
    workers: list[ConnectWorker], spans: SdkSpans, tasks: dict[str, int]
) -> dict[str, set[str]] | None:
    """Per worker (the SDK worker by its URL) what it runs, once the SDK worker has a share and
    the live classic workers (their logs) run exactly the rest: every connector and task once;
    else None."""
    runs = running_now(workers)
    mine = set(spans.open)
    if not mine or set(runs) != {w.worker_id for w in alive(workers)}:
        return None
    placed = [*runs.values(), mine]
    everything = every_item(tasks)
    if sum(len(p) for p in placed) != len(everything) or set().union(*placed) != everything:
        return None
    return {**runs, spans.url: mine}


def described(bootstrap: str, group: str) -> tuple[str, str, str, int]:
    """DescribeGroups of the group: state, protocol type, protocol, number of members (a converted
    group is described as the connect group: type `connect`, its assignor, every worker)."""
    from tools.groups.wire import AdminWire

    with AdminWire(bootstrap, timeout=10.0) as a:
        g = a.describe_group(group)
    return g.group_state, g.protocol_type, g.protocol_data, len(g.members)

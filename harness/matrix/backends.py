"""The servers a matrix cell's group lives on (the `backend` dimension).

* `groupshift`: `groupshift serve` in embedded mode (a child process of the runner).
* `groupshift-kafka-3.9`: `groupshift serve --upstream` in front of an Apache Kafka 3.9 node
  (README "In front of your cluster"): Kafka 3.9 has no KIP-848, groupshift answers every group
  API, records and topics live in Kafka.
* `kafka-4`: Apache Kafka 4.x itself, the reference column every groupshift cell is compared
  with (`harness.kafka_dist.KafkaCluster`). `kafka-X.Y` runs that line instead; `kafka-4.3` gets
  `group.consumer.assignment.interval.ms=0` (target assignments computed in the heartbeat, as
  groupshift does; 4.4 computes them in the background, which hides timing-dependent client
  behaviour).

Kafka 4.2+ backends also serve streams groups (`group.coordinator.rebalance.protocols` with
`streams`), and every backend gets short streams-group timings (STREAMS_SETTINGS) for the
Kafka Streams cells; groupshift backends serve connect groups (`group.connect.enable`, the
Kafka Connect cells, which run on groupshift only). Every backend gets
`group.consumer.migration.policy` from the cell (a broker-level setting in Kafka, `--set` in
groupshift) and short group timings, the same on both sides, so that a Kafka cell and a
groupshift cell differ only in the server. Backends are
shared between the cells of one run that need the same (backend, policy); each cell uses its
own topic and group.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Protocol

from protocol.client_security import ClientSecurity
from tools.groups.wire import AdminWire

REPO = Path(__file__).resolve().parent.parent.parent
BACKENDS = ("groupshift", "groupshift-kafka-3.9", "kafka-4")
POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")

# Kafka's names; groupshift takes them as they are. Classic members choose their own session
# (6 s) and heartbeat (250 ms); the KIP-848 ones get them from the server.
GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.heartbeat.interval.ms": "250",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "6000",
}
# Streams groups (KIP-1071; Kafka Streams cells): a member heartbeats every second and is expired
# after 6 s (Kafka's defaults, 5 s and 45 s, would make every step wait for them), tasks are
# assigned at once rather than after 3 s.
STREAMS_SETTINGS = {
    "group.streams.initial.rebalance.delay.ms": "0",
    "group.streams.min.session.timeout.ms": "1000",
    "group.streams.session.timeout.ms": "6000",
    "group.streams.min.heartbeat.interval.ms": "100",
    "group.streams.heartbeat.interval.ms": "1000",
}
# Kafka computes a streams group's assignment in the heartbeat, as groupshift does (not at most
# once a second, nor offloaded to another thread).
KAFKA_STREAMS_ONLY = {
    "group.streams.assignment.interval.ms": "0",
    "group.streams.assignor.offload.enable": "false",
}
KAFKA_ONLY = {
    "group.coordinator.rebalance.protocols": "classic,consumer",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "auto.create.topics.enable": "false",
}
UPSTREAM_SETTINGS = {
    "upstream.metadata.max.age.ms": "1000",
    "upstream.request.timeout.ms": "10000",
    "upstream.socket.connection.setup.timeout.ms": "2000",
}


class Backend(Protocol):
    name: str
    policy: str
    version: str

    @property
    def bootstrap(self) -> str: ...

    def close(self) -> None: ...


def create_topic(bootstrap: str, topic: str, partitions: int, security: ClientSecurity | None = None) -> None:
    """Create `topic` with confluent-kafka's AdminClient; `security` (a `--command-config`'s)
    becomes librdkafka's settings for a secured cluster."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    config: dict[str, str | int | float | bool] = {"bootstrap.servers": bootstrap}
    if security is not None:
        config |= security.librdkafka_config()
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def admin(bootstrap: str, security: ClientSecurity | None = None) -> AdminWire:
    return AdminWire(bootstrap, timeout=10.0, security=security)


class GatewayServer:
    """`python -m groupshift serve` on a free loopback port, its JSON log in a file."""

    def __init__(self, workdir: Path, sets: dict[str, str], extra_args: tuple[str, ...] = ()) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / "gateway.log"
        args = [sys.executable, "-m", "groupshift", "serve", "--listen", "127.0.0.1:0"]
        args += ["--data-dir", str(workdir / "data"), *extra_args]
        for k, v in sets.items():
            args += ["--set", f"{k}={v}"]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            args,
            cwd=REPO,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
        self.port = 0
        deadline = time.monotonic() + 60
        while not self.port:
            for event in self.events("gateway.listening"):
                self.port = int(event["port"])
            if self.proc.poll() is not None:
                raise RuntimeError(f"groupshift serve exited {self.proc.returncode}: {self.tail()}")
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError("groupshift serve did not log gateway.listening within 60 s")
            time.sleep(0.05)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        out = []
        with open(self.log_path, "rb") as f:
            for line in f:
                with contextlib.suppress(ValueError):
                    e = json.loads(line)
                    if isinstance(e, dict) and (name is None or e.get("event") == name):
                        out.append(e)
        return out

    def tail(self, n: int = 20) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


class GroupshiftBackend:
    def __init__(self, workdir: Path, policy: str, upstream: str | None = None) -> None:
        self.policy = policy
        self.cluster: Any = None
        self.version = "embedded"
        self.name = "groupshift"
        sets = {**GROUP_SETTINGS, **STREAMS_SETTINGS, "group.consumer.migration.policy": policy}
        sets["group.connect.enable"] = "true"  # connect groups (Kafka Connect cells)
        extra: tuple[str, ...] = ()
        if upstream is not None:
            from harness.kafka_dist import KafkaCluster

            self.cluster = KafkaCluster(
                upstream, brokers=1, configs={**GROUP_SETTINGS, **KAFKA_ONLY}, workdir=workdir / "kafka"
            )
            self.cluster.start()
            self.version = f"upstream Kafka {self.cluster.version}"
            self.name = f"groupshift-kafka-{upstream}"
            sets.update(UPSTREAM_SETTINGS)
            extra = ("--upstream", self.cluster.bootstrap)
        try:
            self.gateway = GatewayServer(workdir / "groupshift", sets, extra)
        except BaseException:
            if self.cluster is not None:
                self.cluster.stop()
            raise

    @property
    def bootstrap(self) -> str:
        return self.gateway.bootstrap

    def close(self) -> None:
        try:
            self.gateway.close()
        finally:
            if self.cluster is not None:
                self.cluster.stop()


class KafkaBackend:
    def __init__(self, workdir: Path, policy: str, spec: str = "4") -> None:
        from harness.kafka_dist import KafkaCluster

        self.policy = policy
        self.name = f"kafka-{spec}"
        configs = {**GROUP_SETTINGS, **KAFKA_ONLY, "group.consumer.migration.policy": policy}
        if streams_groups_ga(spec):
            configs.update(STREAMS_SETTINGS)
            configs.update(KAFKA_STREAMS_ONLY)
            configs["group.coordinator.rebalance.protocols"] = "classic,consumer,streams"
        if spec == "4.3":
            # 4.3 computes target assignments in the heartbeat when the interval is 0, as
            # groupshift always does (4.4 computes them in the background whatever it says)
            configs["group.consumer.assignment.interval.ms"] = "0"
        self.cluster = KafkaCluster(spec, brokers=1, configs=configs, workdir=workdir / "kafka")
        self.cluster.start()
        self.version = str(self.cluster.version)

    @property
    def bootstrap(self) -> str:
        return str(self.cluster.bootstrap)

    def close(self) -> None:
        self.cluster.stop()


def streams_groups_ga(spec: str) -> bool:
    """Whether Kafka `spec` (a line: 4, 4.3) serves streams groups as a release feature (4.2+;
    4.1 had them early access, behind unstable API versions)."""
    parts = [int(x) for x in spec.split(".") if x.isdigit()]
    if parts == [4] or parts[:1] > [4]:
        return True
    return len(parts) >= 2 and (parts[0], parts[1]) >= (4, 2)


def start_backend(name: str, policy: str, workdir: Path) -> Backend:
    if name == "groupshift":
        return GroupshiftBackend(workdir, policy)
    if name.startswith("groupshift-kafka-"):
        return GroupshiftBackend(workdir, policy, upstream=name.removeprefix("groupshift-kafka-"))
    if name.startswith("kafka-"):
        return KafkaBackend(workdir, policy, name.removeprefix("kafka-"))
    raise ValueError(f"unknown backend {name!r} (known: {', '.join(BACKENDS)})")


class BackendPool:
    """One backend per (name, policy), started on first use, shared by the run's cells."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._lock = threading.Lock()
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._backends: dict[tuple[str, str], Backend] = {}
        self._failed: dict[tuple[str, str], str] = {}

    def get(self, name: str, policy: str) -> Backend:
        key = (name, policy)
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._failed:
                raise RuntimeError(self._failed[key])
            if key not in self._backends:
                try:
                    self._backends[key] = start_backend(name, policy, self.workdir / f"{name}-{policy}")
                except Exception as e:
                    self._failed[key] = f"backend {name} (policy {policy}) did not start: {e}"
                    raise RuntimeError(self._failed[key]) from e
            return self._backends[key]

    def close(self) -> None:
        with self._lock:
            backends, self._backends = list(self._backends.values()), {}
        for b in backends:
            with contextlib.suppress(Exception):
                b.close()

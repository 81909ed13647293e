"""A ZooKeeper-mode Apache Kafka (2.x) on 127.0.0.1, from the jars `maven.resolve` cached.

Kafka before 2.8 has no KRaft, and before 2.8 no topic ids: the oldest clusters, the ones least
able to upgrade their brokers, are what groupshift's synthetic topic ids are for
(gateway/upstream/topic_ids.py), so the reference launcher runs them too. A 2.x broker's POM
depends on `org.apache.zookeeper:zookeeper` at the version that release was built with (3.5.7
for 2.4.1, 3.5.9 for 2.8.2), so the broker component `maven.resolve` caches already holds the
matching ZooKeeper server; no second download. Layout of the work directory:

* `zookeeper/zoo.cfg`, `zookeeper/data`, `zookeeper/server.log`: one standalone ZooKeeper
  (`org.apache.zookeeper.server.ZooKeeperServerMain`) on a free 127.0.0.1 port, its admin
  server off;
* `node-<i>/server.properties`, `node-<i>/data`, `node-<i>/server.log`: broker `i`
  (`broker.id=i`, `zookeeper.connect` with a per-cluster chroot), one PLAINTEXT listener.

The class offers what the upstream e2e tests use of `KafkaCluster` (`bootstrap`, `version`,
`size`, `start`/`stop`, `kill_broker`/`start_broker`, `log_tail`). Java 17 runs 2.4.1 and 2.8.2
as they are (checked here: broker, topic creation, produce, fetch, classic groups).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from harness.kafka_dist.cluster import (
    HOST,
    KafkaStartError,
    _tail,
    free_port,
    jvm_opts,
    write_logging_configs,
)
from harness.kafka_dist.maven import KafkaDist, resolve
from harness.kafka_dist.wire import api_versions, broker_ids

ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
#: ZooKeeper needs far less than a broker.
ZOOKEEPER_HEAP = "-Xmx128m"


def _port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=0.5):
        return True
    return False


class _Process:
    """One JVM of the cluster, its output appended to `log`."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, cmd: list[str]) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            out.write(f"\n--- groupshift: starting at {time.ctime()} ---\n".encode())
            out.flush()
            self.process = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 30.0) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


class ZooKeeperKafkaCluster:
    """ZooKeeper plus `brokers` Kafka 2.x brokers; a context manager that starts and stops them.

    `version` is a spec for `resolve` ("2.4.1", "2.8.2"), unless `dist` is given. `configs` are
    broker properties applied on top of the defaults, unchanged."""

    def __init__(
        self,
        version: str = "2.4.1",
        brokers: int = 1,
        configs: Mapping[str, str] | None = None,
        workdir: str | Path | None = None,
        *,
        dist: KafkaDist | None = None,
        start_timeout: float = 120.0,
    ) -> None:
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        self.dist = dist if dist is not None else resolve(version)
        if self.dist.version_tuple >= (4,):
            raise ValueError(f"Kafka {self.dist.version} has no ZooKeeper mode: use KafkaCluster")
        self.version = self.dist.version
        self.size = brokers
        self.configs = {k: str(v) for k, v in (configs or {}).items()}
        self.start_timeout = start_timeout
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="kafka-zk-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.logging_props = write_logging_configs(self.workdir / "config")
        self.zookeeper_port = free_port()
        self.ports = [free_port() for _ in range(brokers)]
        self.zookeeper = _Process(self.workdir / "zookeeper" / "server.log")
        self.nodes = [_Process(self.workdir / f"node-{i}" / "server.log") for i in range(brokers)]
        self.started = False

    # --- addresses ----------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{HOST}:{p}" for p in self.ports)

    def port(self, i: int = 0) -> int:
        return self.ports[i]

    def log_tail(self, i: int = 0, lines: int = 40) -> str:
        return _tail(self.nodes[i].log, lines)

    def api_versions(self, i: int = 0) -> dict[int, tuple[int, int]]:
        return api_versions(HOST, self.ports[i])

    # --- processes ----------------------------------------------------------------------------

    def _java(self, main: str, *args: str, heap: str | None = None) -> list[str]:
        opts = jvm_opts()
        if heap is not None:
            opts = [o for o in opts if not o.startswith("-Xmx")] + [heap]
        return ["java", *opts, *self.logging_props, "-cp", self.dist.classpath, main, *args]

    def _write_zookeeper_config(self) -> Path:
        home = self.workdir / "zookeeper"
        (home / "data").mkdir(parents=True, exist_ok=True)
        cfg = home / "zoo.cfg"
        cfg.write_text(
            f"dataDir={home / 'data'}\n"
            f"clientPort={self.zookeeper_port}\n"
            f"clientPortAddress={HOST}\n"
            "admin.enableServer=false\n"
            "maxClientCnxns=0\n"
            "tickTime=500\n"
        )
        return cfg

    def _write_broker_properties(self, i: int) -> Path:
        replicas = str(min(3, self.size))
        props = {
            "broker.id": str(i),
            "listeners": f"PLAINTEXT://{HOST}:{self.ports[i]}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.ports[i]}",
            "zookeeper.connect": f"{HOST}:{self.zookeeper_port}/kafka",
            "zookeeper.connection.timeout.ms": "30000",
            "log.dirs": str(self.workdir / f"node-{i}" / "data"),
            "num.partitions": "1",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            **self.configs,
        }
        path = self.workdir / f"node-{i}" / "server.properties"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return path

    def start(self) -> ZooKeeperKafkaCluster:
        """ZooKeeper, then every broker; returns when every broker answers and is registered."""
        if self.started:
            return self
        self.started = True
        try:
            self.zookeeper.start(
                self._java(ZOOKEEPER_MAIN, str(self._write_zookeeper_config()), heap=ZOOKEEPER_HEAP)
            )
            deadline = time.monotonic() + self.start_timeout
            while not _port_open(self.zookeeper_port):
                if not self.zookeeper.running() or time.monotonic() > deadline:
                    raise KafkaStartError(f"ZooKeeper did not start:\n{_tail(self.zookeeper.log)}")
                time.sleep(0.1)
            for i in range(self.size):
                self.start_broker(i, wait=False)
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def start_broker(self, i: int, wait: bool = True) -> None:
        if not self.nodes[i].running():
            self.nodes[i].start(self._java("kafka.Kafka", str(self._write_broker_properties(i))))
        if wait:
            self.wait_ready()

    def kill_broker(self, i: int) -> None:
        """SIGKILL broker `i` (a crash; ZooKeeper expires its session)."""
        self.nodes[i].stop(signal.SIGKILL)

    def stop_broker(self, i: int, timeout: float = 30.0) -> None:
        self.nodes[i].stop(signal.SIGTERM, timeout)

    def wait_ready(self, timeout: float | None = None) -> None:
        """Until every running broker answers ApiVersions and the metadata lists them all."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.start_timeout)
        while True:
            running = [i for i, n in enumerate(self.nodes) if n.process is not None]
            for i in running:
                if not self.nodes[i].running():
                    raise KafkaStartError(f"Kafka {self.version} broker {i} exited:\n{self.log_tail(i)}")
            try:
                ids = set(broker_ids(HOST, self.ports[running[0]])) if running else set()
            except (OSError, ConnectionError, KeyError, ValueError):
                ids = set()
            if set(running) <= ids:
                return
            if time.monotonic() > deadline:
                raise KafkaStartError(
                    f"Kafka {self.version} did not become ready:\n{self.log_tail(running[0])}"
                )
            time.sleep(0.2)

    def stop(self, timeout: float = 30.0) -> None:
        """Brokers first (controlled shutdown needs ZooKeeper), then ZooKeeper."""
        for node in self.nodes:
            if node.running():
                with contextlib.suppress(ProcessLookupError):
                    assert node.process is not None
                    node.process.send_signal(signal.SIGTERM)
        for node in self.nodes:
            node.stop(signal.SIGTERM, timeout)
        self.zookeeper.stop(signal.SIGTERM, 10)
        self.started = False

    def cleanup(self) -> None:
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ZooKeeperKafkaCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if exc_type is None:
            self.cleanup()

    def __repr__(self) -> str:
        return f"ZooKeeperKafkaCluster({self.version!r}, brokers={self.size}, bootstrap={self.bootstrap!r})"

"""A KRaft Apache Kafka cluster on 127.0.0.1, started from the jars `maven.resolve` cached.

Every node is a combined broker and controller (`process.roles=broker,controller`) with a
static quorum (`controller.quorum.voters`, accepted by 3.x and 4.x alike, so the storage is
formatted the same way on every version: `kafka.tools.StorageTool format -t <cluster id> -c
<properties>`). One node is the usual single-node setup; N nodes form an N-voter quorum, so one
node can be killed (SIGKILL) and restarted while the rest keep a majority, which is what fault
tests need. Ports are free ports picked at start and kept across a node's restarts, the data
lives in a work directory (a temporary one unless given), and each node's output goes to
`node-<i>/server.log`, kept for post-mortems. A work directory an earlier run formatted is
started again as it was (its cluster id, data and ports), not formatted anew.

Defaults suit a small local cluster (internal topics' replication factor = min(3, nodes));
`configs` are Kafka broker properties applied on top, unchanged. `security` ("ssl",
"sasl_plaintext", "sasl_ssl") secures the client and controller listeners and turns on the
StandardAuthorizer (harness.kafka_dist.security; `cluster.security` writes the client properties).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from harness.kafka_dist.cds import CdsSession
from harness.kafka_dist.log4j import BROKER_LOG4J1, BROKER_LOG4J2, write_log4j_configs
from harness.kafka_dist.maven import KafkaDist, resolve
from harness.kafka_dist.security import CLIENT_USERS, SASL_MECHANISMS, KafkaSecurity
from harness.kafka_dist.wire import api_versions, broker_ids

HOST = "127.0.0.1"
DEFAULT_JVM_OPTS = (
    "-Xmx512m",
    "-Xms64m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)


class KafkaStartError(RuntimeError):
    """A node exited or did not answer in time; the message carries its log tail."""


_HANDED_OUT: set[int] = set()  # ports this process was given, so none is given twice


def free_port() -> int:
    """A port free now and never handed out before by this process. The kernel may give the
    same ephemeral port to two binds in a row once the first socket is closed; a node whose
    client and controller listeners got one port each that way failed to start ("two listeners
    on the same port") and errored a whole e2e module in a clean-clone CI run."""
    if len(_HANDED_OUT) > 20_000:  # about the whole ephemeral range: start over
        _HANDED_OUT.clear()
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((HOST, 0))
            port = int(sock.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def new_cluster_id() -> str:
    """A Kafka `Uuid` in its base64url, unpadded form (what `kafka-storage random-uuid` prints).
    Like Kafka's `Uuid.randomUuid`, never one starting with "-": `kafka-storage format -t -x...`
    would read it as an option (1 start in 64 failed so)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def jvm_opts() -> list[str]:
    extra = os.environ.get("GROUPSHIFT_KAFKA_JVM_OPTS")
    return extra.split() if extra else list(DEFAULT_JVM_OPTS)


def write_logging_configs(directory: Path, level: str = "info") -> list[str]:
    """Logging config files for both of Kafka's logging backends (log4j2 from 4.0 on, reload4j
    before); returns the JVM system properties pointing at them. Output goes to stdout."""
    return write_log4j_configs(
        directory, BROKER_LOG4J2.format(level=level), BROKER_LOG4J1.format(level_upper=level.upper())
    )


def _formatted_cluster_id(workdir: Path) -> str | None:
    """The cluster id `kafka-storage format` wrote into node 0's data dir, if it ran there."""
    meta = workdir / "node-0" / "data" / "meta.properties"
    if not meta.exists():
        return None
    for line in meta.read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip() == "cluster.id":
            return value.strip()
    return None


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class KafkaNode:
    """One combined broker+controller JVM."""

    def __init__(self, cluster: KafkaCluster, node_id: int, port: int = 0) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.port = port or free_port()
        self.controller_port = free_port()
        # With `proxied_listener`: a second client listener (`PROXIED`) on `proxied_port`, which
        # advertises `proxy_port`, where a test runs a TCP forwarder it can stop (a network cut).
        self.proxied_port = free_port() if cluster.proxied_listener else 0
        self.proxy_port = free_port() if cluster.proxied_listener else 0
        self.dir = cluster.workdir / f"node-{node_id}"
        self.data_dir = self.dir / "data"
        self.properties = self.dir / "server.properties"
        self.log_path = self.dir / "server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._cds: CdsSession | None = None
        #: The node's storage was formatted by an earlier run in this workdir: restart on it.
        self.formatted = (self.data_dir / "meta.properties").exists()
        if self.formatted:
            self._reuse_ports()
        #: Started and not deliberately stopped or killed since: must be running.
        self.wanted = False

    def _reuse_ports(self) -> None:
        """An existing node restarts on the ports it had: its `server.properties` and its
        quorum peers name them (the controller quorum is static), and clients know the address."""
        props = dict(line.split("=", 1) for line in self.properties.read_text().splitlines() if "=" in line)
        for listener in props.get("listeners", "").split(","):
            name, _, address = listener.partition("://")
            port = int(address.rpartition(":")[2]) if address else 0
            if name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
                self.port = port
            elif name == "CONTROLLER":
                self.controller_port = port

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def write_properties(self) -> None:
        c = self.cluster
        replicas = str(min(3, c.size))
        client = c.security.listener_name if c.security is not None else "PLAINTEXT"
        props: dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": ",".join(f"{n.node_id}@{HOST}:{n.controller_port}" for n in c.nodes),
            "listeners": f"{client}://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}",
            "advertised.listeners": f"{client}://{HOST}:{self.port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": "1",
        }
        if c.proxied_listener:
            props["listeners"] += f",PROXIED://{HOST}:{self.proxied_port}"
            props["advertised.listeners"] += f",PROXIED://{HOST}:{self.proxy_port}"
            props["listener.security.protocol.map"] += ",PROXIED:PLAINTEXT"
        if c.dist.version_tuple >= (4,):
            props["share.coordinator.state.topic.replication.factor"] = replicas
            props["share.coordinator.state.topic.min.isr"] = "1"
        if c.security is not None:
            props.update(c.security.broker_properties())
        props.update(c.configs)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.properties.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def _java(self, main: str, *args: str, cds: CdsSession | None = None) -> list[str]:
        shared = cds.options if cds is not None else self.cluster.shared_archive_options()
        return [
            "java",
            *jvm_opts(),
            *shared,
            *self.cluster.logging_props,
            "-cp",
            self.cluster.dist.classpath,
            main,
            *args,
        ]

    def format(self) -> subprocess.Popen[bytes] | None:
        """Format the node's storage (None when an earlier run in this workdir did, or when a
        kept format of the same inputs was copied in: `_format_template`)."""
        if self.formatted:
            return None
        template = self._format_template()
        if template is not None and template.is_dir():
            self._format_from(template)
            return None
        out = open(self.dir / "format.log", "wb")  # noqa: SIM115 - closed by the caller's wait
        cmd = self._java(
            "kafka.tools.StorageTool",
            "format",
            "-t",
            self.cluster.cluster_id,
            "-c",
            str(self.properties),
            *self.cluster.format_args,
            *(self.cluster.security.format_args() if self.cluster.security is not None else ()),
        )
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        out.close()
        return proc

    # --- kept formats ---------------------------------------------------------------------------
    #
    # `kafka-storage format` is a JVM of its own (about 2 s on a small machine, before every new
    # cluster's start). What it writes is a function of its inputs: the release, the node's
    # properties, the cluster id and the format arguments, plus a random `directory.id` (and
    # random SCRAM salts): `meta.properties` and the bootstrap metadata (`bootstrap.checkpoint`,
    # or `__cluster_metadata-0/00000000000000000000-0000000000.checkpoint` from 4.0 on, where
    # `controller.quorum.voters` is a static quorum, so no listener address is in it). The first
    # format of a set of inputs (less the ports, the data path and the cluster id) is kept beside
    # the release's jars, and later nodes get a copy with their own cluster id and a fresh
    # directory id. `GROUPSHIFT_KAFKA_FORMAT_CACHE=0` turns this off.

    _PORT_AND_PATH_KEYS = ("listeners", "advertised.listeners", "controller.quorum.voters", "log.dirs")

    def _format_template(self) -> Path | None:
        c = self.cluster
        if os.environ.get("GROUPSHIFT_KAFKA_FORMAT_CACHE", "1") == "0" or any(
            a.split("=", 1)[0] in ("--standalone", "-s", "--initial-controllers", "-I") for a in c.format_args
        ):
            return None  # a dynamic quorum's voters, with their addresses, are in the checkpoint
        props = sorted(
            line
            for line in self.properties.read_text().splitlines()
            if (key := line.partition("=")[0]) not in self._PORT_AND_PATH_KEYS
            and not key.endswith(".location")  # a secured cluster's key stores: not read by format
        )
        security_args = c.security.format_args() if c.security is not None else []
        inputs = "\n".join([c.dist.classpath, *props, "--", *c.format_args, "--", *security_args])
        digest = hashlib.sha256(inputs.encode()).hexdigest()[:16]
        return c.dist.home / "formatted" / digest

    def _format_from(self, template: Path) -> None:
        """The kept format copied into this node's data dir, with this cluster's id and a new
        directory id (Kafka's `Uuid.randomUuid()`: 16 random bytes, URL-safe base64 without
        padding, never starting with '-')."""
        shutil.copytree(template, self.data_dir, dirs_exist_ok=True)
        directory_id = "-"
        while directory_id.startswith("-"):
            directory_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        meta = self.data_dir / "meta.properties"
        values = {"cluster.id": self.cluster.cluster_id, "directory.id": directory_id}
        lines = []
        for line in meta.read_text().splitlines():
            name, sep, _ = line.partition("=")
            lines.append(f"{name}={values[name]}" if sep and name in values else line)
        meta.write_text("\n".join(lines) + "\n")

    def keep_format(self) -> None:
        """After this node's `kafka-storage format` succeeded: its output, kept for the next
        node formatted with the same inputs (renamed into place whole, so a concurrent run sees
        all of it or nothing)."""
        template = self._format_template()
        if template is None or template.exists():
            return
        staging = template.with_name(f".{template.name}.{uuid.uuid4().hex[:8]}")
        try:
            shutil.copytree(self.data_dir, staging)
            os.rename(staging, template)
        except OSError:  # another process kept the same format first, or no room: not needed
            shutil.rmtree(staging, ignore_errors=True)

    def start(self) -> None:
        if self.is_running():
            return
        with open(self.log_path, "ab") as out:
            out.write(f"\n--- groupshift: starting node {self.node_id} at {time.ctime()} ---\n".encode())
            out.flush()
            self._cds = self.cluster.cds_session() if self.node_id == 0 else None
            self.wanted = True
            self.process = subprocess.Popen(
                self._java("kafka.Kafka", str(self.properties), cds=self._cds),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def signal(self, sig: signal.Signals) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, sig)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (Kafka's controlled shutdown), then SIGKILL after `timeout` seconds."""
        self.wanted = False
        if self.process is None:
            return
        self.signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.process.wait(10)
        self.exited()

    def kill(self) -> None:
        self.wanted = False
        if self.process is None:
            return
        self.signal(signal.SIGKILL)
        self.process.wait(10)
        self.exited()

    @property
    def writing_archive(self) -> bool:
        """Whether this JVM writes the class-data archive when it exits (cds.py): only a clean
        exit keeps it, so a node that does is never killed where it could be stopped."""
        return self._cds is not None and self._cds.pending is not None

    def exited(self) -> None:
        if self._cds is not None and self.process is not None:
            self._cds.finish(self.process.returncode)
            self._cds = None

    def answers(self) -> bool:
        try:
            api_versions(HOST, self.port, timeout=2.0, security=self.cluster.client_security)
        except (OSError, ConnectionError, KeyError, ValueError):
            return False
        return True


class KafkaCluster:
    """A KRaft cluster of `brokers` combined nodes; a context manager that starts and stops it.

    `version` is a spec for `resolve` ("4", "3.9", "4.3.1") unless `dist` is given.
    """

    def __init__(
        self,
        version: str = "4",
        brokers: int = 1,
        configs: Mapping[str, str] | None = None,
        workdir: str | Path | None = None,
        *,
        dist: KafkaDist | None = None,
        start_timeout: float = 120.0,
        log_level: str = "info",
        proxied_listener: bool = False,
        format_args: Sequence[str] = (),
        port: int = 0,
        security: str | None = None,
        sasl_mechanism: str = "SCRAM-SHA-256",
        users: tuple[str, ...] = CLIENT_USERS,
    ) -> None:
        """`port`: node 0's client port (default a free one). A `workdir` holding a cluster an
        earlier run formatted restarts that cluster: same cluster id, data and ports.
        `security`: "ssl", "sasl_plaintext" or "sasl_ssl" (None: PLAINTEXT, no authorizer);
        `sasl_mechanism`: the one the client properties files name (all three are enabled);
        `users`: the client principals of a secured cluster (certificates, PLAIN and SCRAM users;
        `admin`, the super user, is always one)."""
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        self.dist = dist if dist is not None else resolve(version)
        self.version = self.dist.version
        self.size = brokers
        self.configs = {k: str(v) for k, v in (configs or {}).items()}
        self.start_timeout = start_timeout
        self.proxied_listener = proxied_listener
        # extra `kafka-storage format` arguments, e.g. ("--feature", "group.version=0") (3.8+)
        self.format_args = tuple(format_args)
        self._fixed_port = port
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="kafka-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = _formatted_cluster_id(self.workdir) or new_cluster_id()
        if security is not None and proxied_listener:
            raise ValueError("a secured cluster has no PROXIED (plaintext) listener: one or the other")
        if sasl_mechanism not in SASL_MECHANISMS:
            known = ", ".join(SASL_MECHANISMS)
            raise ValueError(f"SASL mechanism must be one of {known}, not {sasl_mechanism!r}")
        #: Certificates, broker and client properties of a secured cluster (None: PLAINTEXT).
        self.security = (
            KafkaSecurity(security, self.workdir / "security", mechanism=sasl_mechanism, users=users)
            if security is not None
            else None
        )
        #: How the harness connects for its readiness checks (as the `broker` super user).
        self.client_security = self.security.client_security() if self.security is not None else None
        self.logging_props = write_logging_configs(self.workdir / "config", log_level)
        self.nodes = [KafkaNode(self, i, port if i == 0 else 0) for i in range(brokers)]
        if port and self.nodes[0].port != port:
            raise ValueError(f"{self.workdir} holds a cluster on port {self.nodes[0].port}, not {port}")
        self.started = False
        self.startup_seconds: float | None = None
        self._archive_claimed = False

    # --- class-data sharing (harness.kafka_dist.cds) --------------------------------------------

    def shared_archive_options(self) -> list[str]:
        """Use the release's class archive if one exists (format runs, nodes other than 0)."""
        session = CdsSession(self.dist)
        return session.options if session.pending is None else []

    def cds_session(self) -> CdsSession | None:
        """Node 0's first start uses the archive or, if there is none yet, makes it."""
        if self._archive_claimed:
            return None
        self._archive_claimed = True
        return CdsSession(self.dist)

    # --- addresses and logs --------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """Every node's client listener, comma-separated ("127.0.0.1:PORT" for one node)."""
        return ",".join(n.address for n in self.nodes)

    @property
    def proxied_bootstrap(self) -> str:
        """The `PROXIED` listeners' advertised addresses (the test's forwarders), comma-separated:
        a client bootstrapped here reaches every broker only through the forwarders."""
        return ",".join(f"{HOST}:{n.proxy_port}" for n in self.nodes)

    def address(self, i: int) -> str:
        return self.nodes[i].address

    def port(self, i: int = 0) -> int:
        return self.nodes[i].port

    def log_path(self, i: int = 0) -> Path:
        return self.nodes[i].log_path

    def log_tail(self, i: int = 0, lines: int = 40) -> str:
        return _tail(self.nodes[i].log_path, lines)

    def is_running(self, i: int) -> bool:
        return self.nodes[i].is_running()

    def pid(self, i: int) -> int | None:
        proc = self.nodes[i].process
        return proc.pid if proc is not None and proc.poll() is None else None

    def api_versions(self, i: int = 0) -> dict[int, tuple[int, int]]:
        return api_versions(HOST, self.nodes[i].port, security=self.client_security)

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> KafkaCluster:
        """Format every node's storage, start them, wait until ready.

        A free port can be taken by another process between its choice and the JVM's bind; if a
        node fails on "Address already in use", the whole cluster is formatted again on new
        ports, once.
        """
        if self.started:
            return self
        began = time.monotonic()
        try:
            self._start_once()
        except KafkaStartError as exc:
            in_use = "Address already in use" in str(exc)
            if not in_use or self._fixed_port or any(n.formatted for n in self.nodes):
                raise
            for node in self.nodes:
                shutil.rmtree(node.dir, ignore_errors=True)
                node.port, node.controller_port = free_port(), free_port()
            self._start_once()
        self.startup_seconds = time.monotonic() - began
        return self

    def _start_once(self) -> None:
        for node in self.nodes:
            node.write_properties()
        formats = [(node, node.format()) for node in self.nodes]
        for node, proc in formats:
            if proc is not None and proc.wait(120) != 0:
                raise KafkaStartError(
                    f"formatting node {node.node_id} failed:\n{_tail(node.dir / 'format.log')}"
                )
            if proc is not None:
                node.keep_format()
        self.started = True
        try:
            for node in self.nodes:
                node.start()
            self.wait_ready()
        except BaseException:
            self.stop()
            raise

    def wait_ready(self, timeout: float | None = None) -> None:
        """Until every running node answers ApiVersions and the metadata lists them all."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.start_timeout)
        while True:
            running = [n for n in self.nodes if n.wanted]
            if not running:
                return
            for node in running:
                if not node.is_running():
                    raise KafkaStartError(
                        f"Kafka {self.version} node {node.node_id} exited "
                        f"(code {node.process.returncode if node.process else None}); "
                        f"log {node.log_path}:\n{_tail(node.log_path)}"
                    )
            if all(n.answers() for n in running):
                try:
                    ids = broker_ids(HOST, running[0].port, security=self.client_security)
                except (OSError, ConnectionError, KeyError, ValueError):
                    ids = []
                if {n.node_id for n in running} <= set(ids):
                    return
            if time.monotonic() > deadline:
                slow = next((n for n in running if not n.answers()), running[0])
                raise KafkaStartError(
                    f"Kafka {self.version} node {slow.node_id} did not become ready in time; "
                    f"log {slow.log_path}:\n{_tail(slow.log_path)}"
                )
            time.sleep(0.2)

    def kill_broker(self, i: int) -> None:
        """SIGKILL node `i` (no controlled shutdown): a crash for fault tests."""
        self.nodes[i].kill()

    def stop_broker(self, i: int, timeout: float = 30.0) -> None:
        """Stop node `i` cleanly (SIGTERM, SIGKILL after `timeout`)."""
        self.nodes[i].stop(timeout)

    def start_broker(self, i: int, wait: bool = True) -> None:
        """Start node `i` again on its ports and data; wait until the cluster lists it."""
        self.nodes[i].start()
        if wait:
            self.wait_ready()

    def stop(self, timeout: float = 30.0, *, graceful: bool = True) -> None:
        """Stop every node (SIGTERM, then SIGKILL after `timeout`), brokers first.

        `graceful=False` is for a cluster whose data is thrown away (a test module's, at its
        end): SIGKILL at once, but for a node writing the class-data archive. Kafka's controlled
        shutdown of every node of a cluster at once protects nothing then, and on a 3-node
        cluster it took 6 s, and 30 s (the SIGKILL timeout) in a CI run where the quorum went
        before the brokers had handed their partitions over."""
        for node in self.nodes:
            node.wanted = False
            node.signal(signal.SIGTERM if graceful or node.writing_archive else signal.SIGKILL)
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            if node.process is None:
                continue
            try:
                node.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.kill()
            node.exited()
        self.started = False

    def cleanup(self) -> None:
        """Remove the work directory if it was a temporary one (logs go with it)."""
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> KafkaCluster:
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
        return f"KafkaCluster(version={self.version!r}, brokers={self.size}, bootstrap={self.bootstrap!r})"

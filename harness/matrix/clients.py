"""What each client library can do, and the command line of its verifiable consumer.

A matrix client is "library@version": `kafka-python`, `aiokafka`, `confluent-kafka` (versions
from PyPI, or `installed`: the runner's own interpreter), or `java` (Kafka's own
`VerifiableConsumer` of that kafka-clients release). Capabilities decide which cells apply:

* the KIP-848 consumer protocol (`group.protocol=consumer`): confluent-kafka 2.12+ (librdkafka's
  KIP-848 support is generally available from 2.12; earlier releases had an early-access
  implementation of an older draft) and Java 3.7+ (VerifiableConsumer's `--group-protocol`);
  kafka-python and aiokafka speak only the classic protocol;
* static membership (KIP-345, `group.instance.id`): Java 2.3+, confluent-kafka, kafka-python
  2.1+, aiokafka;
* the cooperative-sticky assignor (KIP-429): Java 2.4+, confluent-kafka, kafka-python 2.1+.

`kafka-streams` (harness/matrix/streams_clients.py) is a Kafka Streams application of that
release, one instance per member: its "new" protocol is KIP-1071's `streams` (4.1+; the group
becomes a streams group), not `consumer`; it has no assignor choice (Kafka Streams assigns its
own tasks in a classic group, the coordinator in a streams group: assignor `streams`), and the
matrix runs its instances dynamic only.

`kafka-connect` (harness/matrix/connect_scenario.py) is a Kafka Connect cluster of that release:
distributed workers (`ConnectDistributed`, Maven's `connect-runtime`) in a classic group of
protocol type `connect` (assignor `sessioned`: KIP-507's protocol, Connect's own
IncrementalCooperativeAssignor run by the leader), with the project's SDK worker
(connect_worker/) as the new-protocol side (`connect`: the group becomes a connect group,
groupshift's extension); the SDK worker runs in the runner, so it needs no partner client.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.matrix.runtime import ClientSpec

SCRIPT = "harness/matrix/clients/verifiable_consumer.py"
CLASSIC_SESSION_MS = 6000
# A static member must come back within its session; a JVM restarting on a loaded machine can
# take longer than 6 s, and an expired static member means a rebalance the scenario did not ask for.
# (librdkafka wants max.poll.interval.ms >= session.timeout.ms.)
STATIC_SESSION_MS = 20000
CLASSIC_HEARTBEAT_MS = 250
MAX_POLL_MS = 20000
STREAMS_LIBRARY = "kafka-streams"
CONNECT_LIBRARY = "kafka-connect"
#: The Kafka Streams release whose instances play the `streams` side for Kafka Streams 3.x.
PARTNER_STREAMS_VERSION = "4.4"
JAVA_ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    "sticky": "org.apache.kafka.clients.consumer.StickyAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}


def parse_client(text: str) -> ClientSpec:
    library, sep, version = text.partition("@")
    if not sep or not library or not version:
        raise ValueError(f"a client is LIBRARY@VERSION, e.g. kafka-python@2.0.2, not {text!r}")
    return ClientSpec(library, version)


def _vt(version: str) -> tuple[int, ...]:
    """A comparable version; `installed`/`newest`/`4` count as the newest of their line."""
    if version in ("installed", "newest"):
        return (999,)
    parts = []
    for piece in version.removesuffix(".x").split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts) if len(parts) > 1 else (*parts, 999)


def new_protocol(c: ClientSpec) -> str:
    """The protocol a migration moves `c`'s members to from `classic`: KIP-1071's `streams` for
    Kafka Streams, `connect` (groupshift's connect groups) for Kafka Connect, KIP-848's
    `consumer` for every consumer library."""
    if c.library == CONNECT_LIBRARY:
        return "connect"
    return "streams" if c.library == STREAMS_LIBRARY else "consumer"


def speaks(c: ClientSpec, protocol: str) -> bool:
    """Whether `c` can be a member of `protocol` (classic, consumer or streams) itself."""
    if protocol == "classic":
        return True
    if protocol == "streams":
        return c.library == STREAMS_LIBRARY and _vt(c.version) >= (4, 1)
    if protocol == "connect":
        return c.library == CONNECT_LIBRARY  # the SDK worker, whatever the workers' release
    if c.library == CONNECT_LIBRARY:
        return False
    return speaks_consumer_protocol(c)


def speaks_consumer_protocol(c: ClientSpec) -> bool:
    if c.library == "confluent-kafka":
        return _vt(c.version) >= (2, 12)
    if c.library == "java":
        return _vt(c.version) >= (3, 7)
    return c.library == "franz-go"  # kgo.ServerSideBalancer; Sarama has no KIP-848 consumer


def supports_static(c: ClientSpec) -> bool:
    if c.library == CONNECT_LIBRARY:
        return False  # Connect workers set no group.instance.id
    if c.library == STREAMS_LIBRARY:
        return False  # Kafka Streams has static members (KIP-345); the matrix does not drive them yet
    if c.library == "java":
        return _vt(c.version) >= (2, 3)
    if c.library == "kafka-python":
        return _vt(c.version) >= (2, 1)
    return True


def requires_static(c: ClientSpec) -> bool:
    """Kafka 2.3 and 2.4's VerifiableConsumer declares --group-instance-id as required."""
    return c.library == "java" and (2, 3) <= _vt(c.version)[:2] < (2, 5)


def classic_assignors(c: ClientSpec) -> tuple[str, ...]:
    if c.library == STREAMS_LIBRARY:
        return ("streams",)  # StreamsPartitionAssignor, always
    if c.library == CONNECT_LIBRARY:
        return ("sessioned",)  # KIP-507's sub-protocol, Connect's default
    if c.library == "aiokafka":
        return ("range", "roundrobin")
    if c.library == "java":
        return (
            ("range", "roundrobin", "sticky", "cooperative-sticky")
            if _vt(c.version) >= (2, 4)
            else (
                "range",
                "roundrobin",
                "sticky",
            )
        )
    if c.library == "kafka-python" and _vt(c.version) < (2, 1):
        return ("range", "roundrobin")
    return ("range", "roundrobin", "cooperative-sticky")


def partner(c: ClientSpec) -> ClientSpec:
    """The KIP-848 client that plays the consumer-protocol side for a classic-only client in a
    migration scenario (the `streams` side for Kafka Streams 3.x): the newest of its family."""
    if c.library == STREAMS_LIBRARY:
        return ClientSpec(STREAMS_LIBRARY, PARTNER_STREAMS_VERSION)
    if c.library == CONNECT_LIBRARY:
        return c  # its new-protocol side is the SDK worker, in the runner
    if c.library == "java":
        return ClientSpec("java", "4")
    if c.library in ("franz-go", "sarama"):
        return ClientSpec("franz-go", "pinned")
    return ClientSpec("confluent-kafka", "installed")


def consumer_argv(
    client: ClientSpec,
    *,
    bootstrap: str,
    topic: str,
    group: str,
    protocol: str,
    assignor: str,
    instance_id: str | None,
    client_id: str,
    config_dir: Path,
) -> list[str]:
    """The argv `Runtime.spawn` takes for one verifiable consumer of `client` (for Kafka Streams,
    one instance of VerifiableStreams, its state directory under `config_dir`)."""
    if client.library == STREAMS_LIBRARY:
        from harness.matrix.streams_clients import streams_argv

        return streams_argv(
            bootstrap=bootstrap,
            topic=topic,
            group=group,
            protocol=protocol,
            client_id=client_id,
            state_dir=config_dir / "state" / client_id,
        )
    if client.library == "java":
        args = ["VerifiableConsumer", "--topic", topic, "--group-id", group, "--reset-policy", "earliest"]
        args[1:1] = ["--bootstrap-server" if _vt(client.version) >= (2, 5) else "--broker-list", bootstrap]
        props: dict[str, str] = {"client.id": client_id, "fetch.max.wait.ms": "100"}
        props["max.poll.interval.ms"] = str(MAX_POLL_MS)
        if protocol == "consumer":
            # 3.7's VerifiableConsumer puts a null remote assignor into its properties (NPE)
            # unless one is given; "uniform" is the server's default anyway.
            args += ["--group-protocol", "consumer", "--group-remote-assignor", "uniform"]
        else:
            if _vt(client.version) >= (3, 7):
                args += ["--group-protocol", "classic"]
            args += ["--assignment-strategy", JAVA_ASSIGNORS[assignor]]
            args += ["--session-timeout", str(STATIC_SESSION_MS if instance_id else CLASSIC_SESSION_MS)]
            props["heartbeat.interval.ms"] = str(CLASSIC_HEARTBEAT_MS)
        if instance_id:
            args += ["--group-instance-id", instance_id]
        config_dir.mkdir(parents=True, exist_ok=True)
        path = config_dir / f"{client_id}.properties"
        path.write_text(_properties(props))
        args += ["--consumer.config", str(path.resolve())]
        return args
    args = [SCRIPT, "--library", client.library, "--bootstrap-server", bootstrap, "--topic", topic]
    args += ["--group-id", group, "--group-protocol", protocol, "--client-id", client_id]
    args += ["--assignor", "" if protocol == "consumer" else assignor]
    session = STATIC_SESSION_MS if instance_id else CLASSIC_SESSION_MS
    args += ["--session-timeout", str(session), "--heartbeat-interval", str(CLASSIC_HEARTBEAT_MS)]
    args += ["--max-poll-interval", str(MAX_POLL_MS)]
    if instance_id:
        args += ["--group-instance-id", instance_id]
    return args


def _properties(props: Mapping[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())

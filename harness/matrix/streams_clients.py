"""Kafka Streams instances as matrix clients (`kafka-streams@VERSION`).

A Kafka Streams application is one group member per stream thread; the matrix runs
`harness/matrix/clients/VerifiableStreams.java` with one thread, so an instance is one member
and its tasks are what it owns. The topology has one subtopology reading the matrix topic, so
task 0_p is input partition p and the program's events (VerifiableConsumer's shape) name
partitions: a task's processor init and close (Processor API) bracket the task's real
ownership, its records_consumed the offsets it processed. The matrix's checks then read "no
partition owned by two members at once" as "no task active on two instances at once".

Kafka Streams 3.x speaks only the classic protocol (its group is a classic group, protocol type
`consumer`, protocol `stream`, Streams' own assignor: KIP-441's HighAvailabilityTaskAssignor);
4.1+ also speaks KIP-1071's `streams` protocol (`group.protocol=streams`, early access in 4.1,
generally available from 4.2), where the coordinator assigns the tasks. Kafka migrates between
them only offline (an empty classic group becomes a streams group and back); Kafka 4.4 refuses
a streams member joining a classic group with members (GROUP_ID_NOT_FOUND, "Group G is not a
streams group."). groupshift also converts online (docs/streams-classic-groups.md).

The program is compiled once per jar set (`harness.kafka_dist.resolve_component(version,
"streams")`: kafka-streams and its dependencies from Maven) and its classes kept beside the
cached jars, as e2e/java_compile.py's `Program` keeps the e2e programs.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.kafka_dist.java_clients import TOOL_JVM_OPTS
from harness.kafka_dist.log4j import TOOL_LOG4J1_STDERR, TOOL_LOG4J2_STDERR, write_log4j_configs

SOURCE = Path(__file__).resolve().parent / "clients" / "VerifiableStreams.java"
MAIN = "VerifiableStreams"
#: A stream thread heartbeats its classic group every second (3 s by default: how soon it hears
#: of a rebalance), and a stopped instance, which sends no LeaveGroup (Kafka Streams' consumer
#: leaves no classic group on close), is expired after 6 s rather than 45.
CLASSIC_SESSION_MS = 6000
CLASSIC_HEARTBEAT_MS = 1000


@dataclass(frozen=True)
class StreamsProgram:
    """The compiled program and the jars of one Kafka Streams release."""

    version: str  # the exact release, e.g. 4.4.0
    classes: Path
    jars: str
    logging: tuple[str, ...]

    def command(self, args: list[str]) -> list[str]:
        return ["java", *TOOL_JVM_OPTS, *self.logging, "-cp", f"{self.classes}:{self.jars}", MAIN, *args]


def streams_program(version: str, workdir: Path) -> StreamsProgram:
    """Kafka Streams `version` (a release or a line: 3.9, 4.4) and VerifiableStreams compiled
    against it, compiled once per source and jars (an exclusive lock: concurrent runners
    compile once) into `classes-VerifiableStreams-<hash>` beside the jars."""
    from harness.kafka_dist import resolve_component

    dist = resolve_component(version, "streams")
    home = Path(dist.home)
    key = hashlib.sha256(SOURCE.read_bytes() + dist.classpath.encode()).hexdigest()[:12]
    cached = home / f"classes-{MAIN}-{key}"
    if not cached.is_dir():
        with open(home / f"classes-{MAIN}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not cached.is_dir():
                staging = home / f"classes-{MAIN}-{key}.{os.getpid()}"
                shutil.rmtree(staging, ignore_errors=True)
                staging.mkdir(parents=True)
                javac = subprocess.run(
                    ["javac", "-nowarn", "-cp", dist.classpath, "-d", str(staging), str(SOURCE)],
                    capture_output=True,
                    text=True,
                    timeout=300,
                    check=False,
                )
                if javac.returncode != 0:
                    shutil.rmtree(staging, ignore_errors=True)
                    output = (javac.stdout + javac.stderr)[-3000:]
                    raise RuntimeError(f"javac {SOURCE.name} against Kafka Streams {dist.version}:\n{output}")
                os.rename(staging, cached)
    logging = write_log4j_configs(workdir / f"streams-{dist.version}", TOOL_LOG4J2_STDERR, TOOL_LOG4J1_STDERR)
    return StreamsProgram(str(dist.version), cached, dist.classpath, tuple(logging))


def streams_argv(
    *, bootstrap: str, topic: str, group: str, protocol: str, client_id: str, state_dir: Path
) -> list[str]:
    """The argv (`Runtime.spawn`'s) of one instance: the group is the application id."""
    args = [MAIN, "--bootstrap-server", bootstrap, "--topic", topic, "--group-id", group]
    args += ["--group-protocol", protocol, "--client-id", client_id, "--state-dir", str(state_dir.resolve())]
    if protocol == "classic":
        args += ["--session-timeout", str(CLASSIC_SESSION_MS)]
        args += ["--heartbeat-interval", str(CLASSIC_HEARTBEAT_MS)]
    return args

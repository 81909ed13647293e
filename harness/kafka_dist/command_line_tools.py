"""Kafka's command-line tools (the `bin/*.sh` scripts of a distribution) run from the cache.

A Kafka distribution's scripts are thin wrappers: `kafka-run-class.sh <main class>` with the
release's jars on the classpath and `config/tools-log4j*.properties` as the logging config. The
cache holds no distribution, only the jars (`harness.kafka_dist.maven`), so this module is the
wrapper: a script name maps to its main class, which is looked up in the release's jars (several
moved between releases: `AclCommand` from `kafka.admin` in the core jar to `org.apache.kafka.tools`
in 4.0, `ConsumerGroupCommand` to `org.apache.kafka.tools.consumer.group` in 3.8), and the JVM
gets the broker and clients components on its classpath (the core jar holds `DumpLogSegments`,
`ConfigCommand`; `kafka-tools` holds the Verifiable clients) plus a log config sending warnings
to stderr, so the tool's stdout is its output only, as with the scripts.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from harness.kafka_dist.log4j import TOOL_LOG4J1_STDERR, TOOL_LOG4J2_STDERR, write_log4j_configs
from harness.kafka_dist.maven import KafkaDist, KafkaUnavailable, resolve_component

#: Script name (as in `bin/`, without `.sh`) -> its main class candidates, newest layout first.
SCRIPT_CLASSES: dict[str, tuple[str, ...]] = {
    "kafka-consumer-groups": (
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        "kafka.admin.ConsumerGroupCommand",
    ),
    "kafka-configs": ("kafka.admin.ConfigCommand", "org.apache.kafka.tools.ConfigCommand"),
    "kafka-acls": ("org.apache.kafka.tools.AclCommand", "kafka.admin.AclCommand"),
    "kafka-topics": ("org.apache.kafka.tools.TopicCommand", "kafka.admin.TopicCommand"),
    "kafka-dump-log": ("kafka.tools.DumpLogSegments", "org.apache.kafka.tools.DumpLogSegments"),
    "kafka-get-offsets": ("org.apache.kafka.tools.GetOffsetShell", "kafka.tools.GetOffsetShell"),
    "kafka-verifiable-consumer": ("org.apache.kafka.tools.VerifiableConsumer",),
    "kafka-verifiable-producer": ("org.apache.kafka.tools.VerifiableProducer",),
    "kafka-console-consumer": (
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        "kafka.tools.ConsoleConsumer",
    ),
    "kafka-console-producer": ("org.apache.kafka.tools.ConsoleProducer", "kafka.tools.ConsoleProducer"),
    "kafka-features": ("org.apache.kafka.tools.FeatureCommand", "kafka.admin.FeatureCommand"),
    "kafka-metadata-quorum": ("org.apache.kafka.tools.MetadataQuorumCommand",),
}
TOOL_JVM_OPTS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData")


def _classes(dists: Sequence[KafkaDist]) -> frozenset[str]:
    names: set[str] = set()
    for dist in dists:
        for jar in dist.jars():
            if jar.name.startswith("kafka"):
                with zipfile.ZipFile(jar) as zf:
                    names.update(
                        n[: -len(".class")].replace("/", ".") for n in zf.namelist() if n.endswith(".class")
                    )
    return frozenset(names)


def main_class(name: str, dists: Sequence[KafkaDist]) -> str:
    """The class behind script `name` in these jars; LookupError names what was looked for."""
    script = name.removesuffix(".sh")
    candidates = SCRIPT_CLASSES.get(script)
    if candidates is None:
        known = ", ".join(sorted(SCRIPT_CLASSES))
        raise LookupError(f"unknown tool {name!r}; known: {known}")
    present = _classes(dists)
    for candidate in candidates:
        if candidate in present:
            return candidate
    raise LookupError(f"Kafka {dists[0].version} has no {script} ({' or '.join(candidates)})")


def tool_command(name: str, args: Sequence[str], dists: Sequence[KafkaDist], log_dir: Path) -> list[str]:
    """The `java ...` command line that runs script `name` with `args`."""
    # each jar once: both components hold kafka-clients and the logging binding, and two
    # bindings on the path make SLF4J print warnings on every run
    jars: dict[str, Path] = {}
    for dist in dists:
        for jar in dist.jars():
            jars.setdefault(jar.name, jar)
    classpath = ":".join(str(jar) for jar in jars.values())
    logging = write_log4j_configs(log_dir, TOOL_LOG4J2_STDERR, TOOL_LOG4J1_STDERR)
    return ["java", *TOOL_JVM_OPTS, *logging, "-cp", classpath, main_class(name, dists), *args]


def run_tool(version: str, name: str, args: Sequence[str], err: TextIO = sys.stderr) -> int:
    """Run a Kafka tool with this process's stdin/stdout/stderr; its exit status (1 when Kafka
    or the tool is unavailable, 2 for an unknown tool name)."""
    if name.removesuffix(".sh") not in SCRIPT_CLASSES:
        known = ", ".join(sorted(SCRIPT_CLASSES))
        print(f"groupshift kafka tool: error: unknown tool {name!r}; known: {known}", file=err)
        return 2
    try:
        clients = resolve_component(version, "clients")
        # the broker jars of the very release the tools come from: one kafka-clients on the path
        dists = [resolve_component(clients.version, "broker"), clients]
    except (KafkaUnavailable, ValueError) as exc:
        print(f"error: {exc}", file=err)
        return 1
    log_dir = Path(tempfile.mkdtemp(prefix="kafka-tool-"))
    try:
        command = tool_command(name, args, dists, log_dir)
    except LookupError as exc:
        shutil.rmtree(log_dir, ignore_errors=True)
        print(f"error: {exc}", file=err)
        return 1
    try:
        return subprocess.run(command, check=False).returncode
    except KeyboardInterrupt:
        return 130
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)

"""Kafka's own Java client tools of any release, run as subprocesses.

Kafka's system tests drive consumers and producers through `VerifiableConsumer` and
`VerifiableProducer` (in `kafka-tools`, package `org.apache.kafka.tools`): each prints one JSON
object per line on stdout for every event (`startup_complete`, `partitions_assigned`,
`records_consumed`, `offsets_committed`, `producer_send_success`, `shutdown_complete`, ...),
which makes the real Java client's view of a group checkable from Python. `--group-protocol`
(classic | consumer) and `--group-remote-assignor` exist from 3.7 on (KIP-848's client side).
`ConsumerGroupCommand` (`kafka-consumer-groups.sh`) moved from `kafka.admin` in the core jar to
`org.apache.kafka.tools.consumer.group` in 3.8; the class is looked up in the jars, not assumed.

Tool logging goes to stderr (a per-process file), so stdout carries only the tool's output.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import Any

from harness.kafka_dist.cds import CdsSession
from harness.kafka_dist.log4j import TOOL_LOG4J1_STDERR, TOOL_LOG4J2_STDERR, write_log4j_configs
from harness.kafka_dist.maven import KafkaDist, resolve_component

TOOL_CLASSES: dict[str, tuple[str, ...]] = {
    "VerifiableConsumer": ("org.apache.kafka.tools.VerifiableConsumer",),
    "VerifiableProducer": ("org.apache.kafka.tools.VerifiableProducer",),
    "ConsumerGroupCommand": (
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        "kafka.admin.ConsumerGroupCommand",
    ),
}
TOOL_JVM_OPTS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData")


@dataclass(frozen=True)
class ToolResult:
    returncode: int
    stdout: str
    stderr: str


class VerifiableProcess:
    """A running VerifiableConsumer/VerifiableProducer; its stdout parsed as JSON events.

    A reader thread queues each event (a dict; lines that are not JSON are kept in `.noise`), so
    `next_event(timeout)` and `wait_for(name, timeout)` never block past their timeout.
    """

    def __init__(self, command: list[str], stderr_path: Path, cds: CdsSession | None = None) -> None:
        self.command = command
        self.stderr_path = stderr_path
        self._cds = cds
        self._stderr = open(stderr_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.events: list[dict[str, Any]] = []
        self.noise: list[str] = []
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.decode(errors="replace").strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                self.noise.append(line)
                continue
            if isinstance(event, dict):
                self._queue.put(event)
            else:
                self.noise.append(line)
        self._queue.put(None)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stderr_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def next_event(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next event, or None when the tool's stdout closed; TimeoutError after `timeout`."""
        try:
            event = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no event within {timeout}s; stderr:\n{self.stderr_tail()}") from None
        if event is None:
            self._queue.put(None)  # stay closed for later callers
            return None
        self.events.append(event)
        return event

    def iter_events(self, timeout: float | None = None) -> Iterator[dict[str, Any]]:
        """Events until stdout closes; each wait is bounded by `timeout`."""
        while (event := self.next_event(timeout)) is not None:
            yield event

    def events_until_exit(self, timeout: float = 120.0) -> list[dict[str, Any]]:
        """Every event until the tool says `shutdown_complete` or closes stdout (a tool run with
        a record or time limit exits on its own), the whole wait bounded by `timeout`."""
        events = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            event = self.next_event(deadline - time.monotonic())
            if event is None:
                break
            events.append(event)
            if event.get("name") == "shutdown_complete":
                break
        return events

    def wait_for(
        self,
        name: str,
        timeout: float = 60.0,
        predicate: Callable[[dict[str, Any]], bool] | None = None,
    ) -> dict[str, Any]:
        """The first next event named `name` (and matching `predicate`) within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {name!r} event within {timeout}s; stderr:\n{self.stderr_tail()}")
            event = self.next_event(left)
            if event is None:
                raise EOFError(
                    f"tool exited ({self.process.poll()}) before {name!r}; stderr:\n{self.stderr_tail()}"
                )
            if event.get("name") == name and (predicate is None or predicate(event)):
                return event

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM (the tools then close their client and print `shutdown_complete`), SIGKILL
        after `timeout`; returns the exit code. Events printed meanwhile stay readable."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reader.join(5)
        self._stderr.close()
        self._exited()
        return int(self.process.returncode)

    def kill(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        self._exited()

    def _exited(self) -> None:
        if self._cds is not None:
            self._cds.finish(self.process.returncode)
            self._cds = None

    def drain(self) -> list[dict[str, Any]]:
        """Every event the reader has queued so far, without waiting."""
        out: list[dict[str, Any]] = []
        while True:
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                return out
            if event is None:
                self._queue.put(None)
                return out
            self.events.append(event)
            out.append(event)

    def __enter__(self) -> VerifiableProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class JavaClients:
    """Kafka's Java tools of one release (a `clients` component from the cache)."""

    def __init__(self, dist: KafkaDist, workdir: str | Path | None = None) -> None:
        """`workdir` holds client configs and each tool's stderr (a temporary one by default)."""
        self.dist = dist
        self.version = dist.version
        if workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix=f"kafka-clients-{dist.version}-"))
            weakref.finalize(self, shutil.rmtree, str(self.workdir), True)
        else:
            self.workdir = Path(workdir)
            self.workdir.mkdir(parents=True, exist_ok=True)
        self.logging_props = write_log4j_configs(self.workdir, TOOL_LOG4J2_STDERR, TOOL_LOG4J1_STDERR)
        self._counter = 0
        self._archive_claimed = False

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return self.dist.version_tuple

    @cached_property
    def _classes(self) -> frozenset[str]:
        names: set[str] = set()
        for jar in self.dist.jars():
            if not jar.name.startswith("kafka"):
                continue
            with zipfile.ZipFile(jar) as zf:
                names.update(
                    n[: -len(".class")].replace("/", ".") for n in zf.namelist() if n.endswith(".class")
                )
        return frozenset(names)

    def main_class(self, tool: str) -> str:
        """The class implementing `tool` ("VerifiableConsumer", "ConsumerGroupCommand", ...)."""
        for candidate in TOOL_CLASSES.get(tool, (tool,)):
            if candidate in self._classes:
                return candidate
        raise LookupError(f"Kafka {self.version} has no {tool}")

    def _cds(self) -> CdsSession | None:
        """The first tool JVM makes the class archive (harness.kafka_dist.cds); later ones use it."""
        session = CdsSession(self.dist)
        if session.pending is None:
            return session if session.options else None
        if self._archive_claimed:
            return None
        self._archive_claimed = True
        return session

    def command(self, tool: str, *args: str, cds: CdsSession | None = None) -> list[str]:
        """The `java ...` command line that runs `tool` with `args`."""
        return [
            "java",
            *TOOL_JVM_OPTS,
            *(cds.options if cds is not None else []),
            *self.logging_props,
            "-cp",
            self.dist.classpath,
            self.main_class(tool),
            *args,
        ]

    def _config_file(self, properties: Mapping[str, str]) -> Path:
        self._counter += 1
        path = self.workdir / f"client-{self._counter}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
        return path

    def _stderr_path(self, tool: str) -> Path:
        self._counter += 1
        return self.workdir / f"{tool}-{self._counter}.stderr"

    def run(self, tool: str, *args: str, timeout: float = 120.0) -> ToolResult:
        cds = self._cds()
        code: int | None = None
        try:
            proc = subprocess.run(
                self.command(tool, *args, cds=cds),
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                check=False,
            )
            code = proc.returncode
        finally:
            if cds is not None:
                cds.finish(code)
        return ToolResult(proc.returncode, proc.stdout, proc.stderr)

    def consumer_groups(self, bootstrap: str, *args: str, timeout: float = 120.0) -> ToolResult:
        """`kafka-consumer-groups.sh --bootstrap-server <bootstrap> <args>`, e.g. ("--list",)."""
        return self.run("ConsumerGroupCommand", "--bootstrap-server", bootstrap, *args, timeout=timeout)

    def list_groups(self, bootstrap: str, timeout: float = 120.0) -> list[str]:
        result = self.consumer_groups(bootstrap, "--list", timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(f"ConsumerGroupCommand --list failed ({result.returncode}): {result.stderr}")
        return [line.strip() for line in result.stdout.splitlines() if line.strip()]

    def verifiable_consumer(
        self,
        bootstrap: str,
        topic: str,
        group_id: str,
        *,
        group_protocol: str | None = None,
        group_remote_assignor: str | None = None,
        group_instance_id: str | None = None,
        max_messages: int | None = None,
        enable_autocommit: bool = False,
        reset_policy: str = "earliest",
        properties: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
    ) -> VerifiableProcess:
        """Start `VerifiableConsumer`; `group_protocol` ("classic" | "consumer") needs 3.7+."""
        if (group_protocol or group_remote_assignor) and self.version_tuple < (3, 7):
            raise ValueError(f"VerifiableConsumer {self.version} has no --group-protocol (3.7+)")
        args = ["--bootstrap-server", bootstrap, "--topic", topic, "--group-id", group_id]
        args += ["--reset-policy", reset_policy]
        if group_protocol is not None:
            args += ["--group-protocol", group_protocol]
        if group_remote_assignor is not None:
            args += ["--group-remote-assignor", group_remote_assignor]
        if group_instance_id is not None:
            args += ["--group-instance-id", group_instance_id]
        if max_messages is not None:
            args += ["--max-messages", str(max_messages)]
        if enable_autocommit:
            args.append("--enable-autocommit")
        if properties:
            args += ["--consumer.config", str(self._config_file(properties))]
        args += list(extra_args)
        cds = self._cds()
        command = self.command("VerifiableConsumer", *args, cds=cds)
        return VerifiableProcess(command, self._stderr_path("consumer"), cds)

    def verifiable_producer(
        self,
        bootstrap: str,
        topic: str,
        max_messages: int,
        *,
        throughput: int = -1,
        acks: int = -1,
        properties: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
    ) -> VerifiableProcess:
        """Start `VerifiableProducer` sending `max_messages` records (values "0", "1", ...)."""
        args = ["--bootstrap-server", bootstrap, "--topic", topic, "--max-messages", str(max_messages)]
        args += ["--throughput", str(throughput), "--acks", str(acks)]
        if properties:
            args += ["--producer.config", str(self._config_file(properties))]
        args += list(extra_args)
        cds = self._cds()
        command = self.command("VerifiableProducer", *args, cds=cds)
        return VerifiableProcess(command, self._stderr_path("producer"), cds)


def java_clients(spec: str = "4", workdir: str | Path | None = None) -> JavaClients:
    """Kafka's Java tools for a version spec ("4" = newest 4.x that publishes `kafka-tools`)."""
    return JavaClients(resolve_component(spec, "clients"), workdir)

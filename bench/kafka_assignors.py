"""Apache Kafka's server assignors, run beside groupshift's in `bench.assignors`.

Kafka's `UniformAssignor` and `RangeAssignor` live in the `kafka-group-coordinator` jar of the
broker (harness.kafka_dist fetches it from Maven Central once). `bench/java/KafkaAssignors.java`
builds the same inputs as `bench.assignors.build_inputs` from the same topic ids and times the
same number of runs; it runs in Java's single-file source mode, so nothing is compiled ahead or
committed. One JVM serves every case of a run, with the JVM flags of Kafka's own start scripts
(bench.kafka_reference), so the assignors run as warm and in the heap a broker gives them.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from bench.kafka_reference import KAFKA_SERVER_JVM_OPTS
from engine.metadata import TopicId

SOURCE = Path(__file__).parent / "java" / "KafkaAssignors.java"


class KafkaAssignorsUnavailable(RuntimeError):
    """Java or Kafka's jars are missing, or the harness died: the message says which."""


class KafkaAssignors:
    """A JVM running `KafkaAssignors.java`; `measure` sends it one case and reads the timings."""

    def __init__(self, version: str = "4.4.0") -> None:
        from harness.kafka_dist.maven import KafkaUnavailable, resolve

        try:
            dist = resolve(version)
        except KafkaUnavailable as exc:
            raise KafkaAssignorsUnavailable(f"Kafka {version}: {exc}") from exc
        self.version = dist.version
        command = ["java", *shlex.split(KAFKA_SERVER_JVM_OPTS), "-cp", dist.classpath, str(SOURCE)]
        try:
            self._proc = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        except OSError as exc:
            raise KafkaAssignorsUnavailable(f"cannot start java: {exc}") from exc

    def measure(
        self,
        assignor: str,
        subscription: str,
        incremental: bool,
        members: int,
        ratio: int,
        topic_ids: Sequence[TopicId],
        budget_s: float,
    ) -> tuple[list[float], list[float], int]:
        """Wall-clock and CPU milliseconds per timed run, and the partitions the result assigns."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        shape = f"{int(incremental)} {members} {ratio} {len(topic_ids)}"
        case = f"CASE {assignor} {subscription} {shape} {budget_s}"
        ids = ",".join(t.hex for t in topic_ids)
        try:
            self._proc.stdin.write(f"{case}\nIDS {ids}\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass
        line = self._proc.stdout.readline()
        if not line:
            raise KafkaAssignorsUnavailable(f"the Kafka assignor harness exited: {self._stderr_tail()}")
        answer = json.loads(line)
        return list(answer["wall"]), list(answer["cpu"]), int(answer["assigned"])

    def _stderr_tail(self) -> str:
        self._proc.wait(timeout=10)
        assert self._proc.stderr is not None
        tail = self._proc.stderr.read().strip().splitlines()[-5:]
        return " | ".join(tail) or f"exit {self._proc.returncode}"

    def close(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def __enter__(self) -> KafkaAssignors:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

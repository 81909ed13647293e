"""Apache Kafka's server assignors, run beside groupshift's in `bench.assignors` and
`bench.streams_assignor`.

Kafka's `UniformAssignor` and `RangeAssignor`, and its streams-group `StickyTaskAssignor`
(KIP-1071), live in the `kafka-group-coordinator` jar of the broker (harness.kafka_dist fetches
it from Maven Central once). `bench/java/KafkaAssignors.java` builds the same inputs as
`bench.assignors.build_inputs` from the same topic ids, `bench/java/KafkaTaskAssignor.java` the
same as `bench.streams_assignor.build_members`; both time the same number of runs as the Python
side. They run in Java's single-file source mode, so nothing is compiled ahead or committed. One
JVM serves every case of a run, with the JVM flags of Kafka's own start scripts
(bench.kafka_reference), so the assignors run as warm and in the heap a broker gives them.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from bench.kafka_reference import KAFKA_SERVER_JVM_OPTS
from engine.metadata import TopicId

SOURCE = Path(__file__).parent / "java" / "KafkaAssignors.java"
TASK_ASSIGNOR_SOURCE = Path(__file__).parent / "java" / "KafkaTaskAssignor.java"


class KafkaAssignorsUnavailable(RuntimeError):
    """Java or Kafka's jars are missing, or the harness died: the message says which."""


class _Harness:
    """A JVM running one of the Java files above in single-file source mode, fed on stdin."""

    def __init__(self, version: str, source: Path) -> None:
        from harness.kafka_dist.maven import KafkaUnavailable, resolve

        try:
            dist = resolve(version)
        except KafkaUnavailable as exc:
            raise KafkaAssignorsUnavailable(f"Kafka {version}: {exc}") from exc
        self.version = dist.version
        command = ["java", *shlex.split(KAFKA_SERVER_JVM_OPTS), "-cp", dist.classpath, str(source)]
        try:
            self._proc = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        except OSError as exc:
            raise KafkaAssignorsUnavailable(f"cannot start java: {exc}") from exc

    def _exchange(self, lines: str) -> Any:
        """Sends one case and reads its one-line JSON answer."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.write(lines)
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass
        line = self._proc.stdout.readline()
        if not line:
            raise KafkaAssignorsUnavailable(f"the Kafka assignor harness exited: {self._stderr_tail()}")
        return json.loads(line)

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

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class KafkaAssignors(_Harness):
    """A JVM running `KafkaAssignors.java`; `measure` sends it one case and reads the timings."""

    def __init__(self, version: str = "4.4.0") -> None:
        super().__init__(version, SOURCE)

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
        shape = f"{int(incremental)} {members} {ratio} {len(topic_ids)}"
        ids = ",".join(t.hex for t in topic_ids)
        answer = self._exchange(f"CASE {assignor} {subscription} {shape} {budget_s}\nIDS {ids}\n")
        return list(answer["wall"]), list(answer["cpu"]), int(answer["assigned"])


# member id -> (active tasks, standby tasks), each subtopology id -> partitions, as Kafka's
# `GroupAssignment` holds them.
KafkaTaskAssignment = dict[str, tuple[dict[str, list[int]], dict[str, list[int]]]]


@dataclass
class TaskAssignorRun:
    """Kafka's StickyTaskAssignor on one case: milliseconds per timed run (wall clock and the
    assigning thread's CPU), the timed result, and for a sticky case the previous assignment it
    started from (its own fresh result without the last member)."""

    wall: list[float]
    cpu: list[float]
    assignment: KafkaTaskAssignment
    previous: KafkaTaskAssignment | None


def _task_assignment(doc: Any) -> KafkaTaskAssignment:
    return {m: (dict(active), dict(standby)) for m, (active, standby) in doc.items()}


class KafkaTaskAssignor(_Harness):
    """A JVM running `KafkaTaskAssignor.java` (Kafka's streams `StickyTaskAssignor`)."""

    def __init__(self, version: str = "4.4.0") -> None:
        super().__init__(version, TASK_ASSIGNOR_SOURCE)

    def measure(
        self,
        members: int,
        members_per_process: int,
        subtopologies: int,
        partitions: int,
        standby_replicas: int,
        sticky: bool,
        budget_s: float,
    ) -> TaskAssignorRun:
        shape = f"{members} {members_per_process} {subtopologies} {partitions} {standby_replicas}"
        answer = self._exchange(f"CASE {shape} {int(sticky)} {budget_s}\n")
        previous = answer["previous"]
        return TaskAssignorRun(
            list(answer["wall"]),
            list(answer["cpu"]),
            _task_assignment(answer["assignment"]),
            None if previous is None else _task_assignment(previous),
        )

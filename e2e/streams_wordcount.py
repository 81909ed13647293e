"""The Kafka Streams 4.4 word count the streams-group e2e tests run (e2e/java_programs/
StreamsWordCount.java: groupBy gives a repartition topic, count a changelog topic), its JVM
instances followed through their stdout, and the true counts of its input. Shared by the
embedded run (e2e/test_streams_groups.py) and the upstream run in front of Kafka 3.9
(e2e/test_upstream_kafka.py)."""

from __future__ import annotations

import collections
import os
import struct
import subprocess
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from harness.kafka_dist.java_clients import TOOL_JVM_OPTS

SOURCE = Path(__file__).parent / "java_programs" / "StreamsWordCount.java"
APP, INPUT, OUTPUT = "wordcount", "words-in", "counts-out"
LINES = [f"the quick brown fox {i % 7} jumps over the lazy dog {i % 3}" for i in range(300)]
ALL_TASKS = {f"{s}_{p}" for s in (0, 1) for p in range(4)}


class Instance:
    """One StreamsWordCount JVM; its stdout lines (`STATE ...`, `TASKS ...`) collected."""

    def __init__(
        self,
        classpath: str,
        bootstrap: str,
        state_dir: Path,
        log: Path,
        app: str = APP,
        input_topic: str = INPUT,
        output_topic: str = OUTPUT,
        main_class: str = "StreamsWordCount",
        extra_args: tuple[str, ...] = (),
        held: bool = False,
    ) -> None:
        """`held`: the JVM starts and builds the topology, but the instance joins its group only
        at `go()` (a roll's next instance, started while the previous step settles)."""
        self.lines: list[str] = []
        self.log = log
        self.proc = subprocess.Popen(
            [
                "java",
                *TOOL_JVM_OPTS,
                "-cp",
                classpath,
                main_class,
                bootstrap,
                app,
                input_topic,
                output_topic,
                str(state_dir),
                *extra_args,
            ],
            stdout=subprocess.PIPE,
            stderr=log.open("wb"),
            stdin=subprocess.PIPE if held else None,
            env={**os.environ, "STREAMS_START_ON_STDIN": "1"} if held else None,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def go(self) -> None:
        """Let a `held` instance start (join its group)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def tasks(self) -> set[str] | None:
        """The active tasks of the last RUNNING state, None before the first."""
        found = [line for line in self.lines if line.startswith("TASKS")]
        if not found:
            return None
        return {t for t in found[-1][len("TASKS") :].strip().split(",") if t}

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def wait_for_disjoint_shares(instances: list[Instance], timeout: float) -> list[set[str]]:
    """The instances' active tasks once each has some, together all of ALL_TASKS and no task on
    two (or the last shares seen when `timeout` passes)."""
    deadline = time.monotonic() + timeout
    shares: list[set[str]] = [set() for _ in instances]
    while time.monotonic() < deadline:
        shares = [i.tasks() or set() for i in instances]
        union = set().union(*shares)
        if all(shares) and union == ALL_TASKS and sum(map(len, shares)) == len(ALL_TASKS):
            break
        time.sleep(0.5)
    return shares


def truth(lines: list[str] = LINES) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for line in lines:
        counts.update(line.split())
    return dict(counts)


def read_counts(bootstrap: str, want: dict[str, int], timeout: float, output: str = OUTPUT) -> dict[str, int]:
    """The latest count per word in the output topic, read until it equals `want` or time is up."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker", "enable.auto.commit": False})
    c.assign([TopicPartition(output, p, 0) for p in range(2)])
    latest: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and latest != want:
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    latest[m.key().decode()] = struct.unpack(">q", m.value())[0]
    finally:
        c.close()
    return latest

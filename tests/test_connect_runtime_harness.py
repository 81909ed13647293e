"""The pure parts of harness/kafka_dist/connect.py, the real Connect cluster's harness
(e2e/test_connect_runtime.py): a worker's log lines read as starts and stops, the intervals they
make, and the check that no connector or task ran on two workers at once."""

from __future__ import annotations

from pathlib import Path

from harness.kafka_dist.connect import ConnectWorker, overlaps, ownership_intervals
from harness.kafka_dist.maven import _artifacts

T = 1795938000000  # the log's epoch-ms timestamps


def _worker(tmp_path: Path, name: str, log: str, killed_ms: int | None = None) -> ConnectWorker:
    """A ConnectWorker without its JVM: only its log and URL are read."""
    w = ConnectWorker.__new__(ConnectWorker)
    w.log = tmp_path / f"{name}.log"
    w.log.write_text(log)
    w.url = f"http://127.0.0.1:{name}"
    w.killed_ms = killed_ms
    w.exited_ms = None
    return w


def test_the_connect_component_is_runtime_and_file_connectors_of_one_release() -> None:
    coordinates = [":".join(a[:3]) for a in _artifacts("4.3.1", "connect")]
    assert "org.apache.kafka:connect-runtime:4.3.1" in coordinates
    assert "org.apache.kafka:connect-file:4.3.1" in coordinates


def test_log_lines_give_intervals_ending_at_a_stop_or_a_kill(tmp_path: Path) -> None:
    a = _worker(
        tmp_path,
        "1",
        "1795938001000 INFO [x] Creating connector src of type org.X (o.a.k.connect.runtime.Worker)\n"
        "1795938001001 INFO [x] Creating task src-0 (org.apache.kafka.connect.runtime.Worker)\n"
        "not a log line\n"
        "1795938002000 INFO [x] Stopping task src-0 (org.apache.kafka.connect.runtime.Worker)\n",
        killed_ms=T + 3000,
    )
    b = _worker(
        tmp_path,
        "2",
        "1795938002500 INFO [y] Creating task src-0 (org.apache.kafka.connect.runtime.Worker)\n",
    )
    spans = ownership_intervals([a, b])
    assert spans["src"] == [(T + 1000, T + 3000, "127.0.0.1:1")]
    assert sorted(spans["src-0"]) == [
        (T + 1001, T + 2000, "127.0.0.1:1"),
        (T + 2500, spans["src-0"][1][1], "127.0.0.1:2"),
    ]
    assert overlaps(spans) == []


def test_a_task_run_by_two_workers_at_once_is_reported(tmp_path: Path) -> None:
    spans = {"t-0": [(1000, 2000, "w1"), (1999, 3000, "w2")], "t-1": [(1000, 2000, "w1"), (2000, 3000, "w2")]}
    found = overlaps(spans)
    assert len(found) == 1 and found[0].startswith("t-0: w1")

"""The matrix's Kafka Connect family end to end (`groupshift matrix run --grid connect-smoke`):
one real cell, in processes (harness/matrix/connect_scenario.py).

On groupshift embedded, three Kafka Connect 4.3 distributed workers (a classic group, protocol
type `connect`, `sessioned`) run a FileStreamSource and a FileStreamSink connector; worker 3
stops and the project's SDK worker joins in its place: the group is a connect group (listed
`connect`, described `incremental`) with every connector and task run once, by the two classic
workers (their logs) and the SDK worker (its callbacks); the SDK worker leaves and the group is
classic again with everything on the two classic workers. The cell passes only if no connector
or task ran on two workers at once, what the SDK worker ran ran on a classic worker before and
after it, and the lines written to the input file reach the sink's file. The Kafka twin is
dropped with its reason (Kafka has no connect groups).

About 30 s on this shared 2-core machine (measured 24 to 32 s: a gateway, three worker JVMs; the
Connect jars cached after the first run).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.kafka_dist import tools_missing

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
CELL = "kafka-connect@4.3/classic/sessioned/dynamic/sdk-worker-conversion/bidirectional/groupshift"


def test_connect_sdk_worker_conversion_cell(tmp_path: Path) -> None:
    missing = tools_missing()
    if missing:
        pytest.skip(f"Kafka Connect cells need Java and the Kafka jars: {missing}")

    def matrix_list(*args: str) -> str:
        return subprocess.run(
            [sys.executable, "-m", "groupshift", "matrix", "list", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout

    assert matrix_list("--grid", "connect-smoke").splitlines() == [CELL]
    # in the default grid the Kafka twin is dropped, and `--dropped` says why
    listed = matrix_list("--grid", "default", "--only", "client=kafka-connect*", "--dropped")
    assert CELL in listed.splitlines()
    assert f"# {CELL.removesuffix('/groupshift')}/kafka-4: Kafka has no connect groups" in listed

    args = [sys.executable, "-m", "groupshift", "matrix", "run", "--grid", "connect-smoke"]
    args += ["--out", str(tmp_path)]
    t = time.monotonic()
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    print(proc.stdout[-3000:], proc.stderr[-2000:], f"took {time.monotonic() - t:.0f}s")
    doc = json.loads((tmp_path / "results.json").read_text())
    (cell,) = doc["cells"]
    assert cell["id"] == CELL
    assert cell["verdict"] == "pass", cell["reason"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"PASS {CELL}" in proc.stdout
    assert cell["versions"] == {"kafka-connect-4.3": "4.3.1"}
    assert [(s["expect_type"], s["observed_type"]) for s in cell["steps"]] == [
        ("classic", "classic"),
        ("connect", "connect"),
        ("classic", "classic"),
    ]
    assert all(s["seconds_to_full_ownership"] is not None and s["error"] is None for s in cell["steps"])
    assert sorted((m["client"], m["protocol"]) for m in cell["members"].values()) == [
        ("connect-sdk", "connect"),
        *[("kafka-connect-4.3", "classic")] * 3,
    ]
    # every connector and task ran (6 lanes), the SDK worker ran some of them between two classic
    # workers: a hand-over to it and one from it per item at least
    windows = cell["windows"]
    assert cell["lanes"] == [
        "lines-in",
        "lines-in-0",
        "lines-out",
        "lines-out-0",
        "lines-out-1",
        "lines-out-2",
    ]
    assert {w["partition"] for w in windows} == set(range(6))
    sdk_lanes = {w["partition"] for w in windows if w["member"] == "sdk"}
    assert sdk_lanes
    for lane in sdk_lanes:
        owners = [w["member"] for w in sorted(windows, key=lambda w: w["start"]) if w["partition"] == lane]
        i = owners.index("sdk")
        assert 0 < i < len(owners) - 1, owners
    assert cell["figures"]["handovers"] >= 2 * len(sdk_lanes)
    assert cell["figures"]["records"] == 150  # every line through the sink
    assert "none on two workers at once" in cell["reason"]
    page = (tmp_path / "report.html").read_text()
    assert ">lines-out-2</text>" in page and "connector / task" in page  # the timeline's named lanes

"""The matrix's Kafka Streams family end to end (`groupshift matrix run --grid streams-smoke
--only scenario=rolling-upgrade`): two real cells, in processes.

- On groupshift embedded, three Kafka Streams 3.9 instances (classic protocol, a classic group)
  are replaced one by one by Kafka Streams 4.4 instances with `group.protocol=streams`: the group
  is a streams group from the first one on (groupshift's online conversion, while the two other
  3.9 instances keep their tasks), every step settles with every task active on exactly one
  instance, and the checks over the instances' own task init/close events pass: no task active
  on two instances at once, no record processed outside its task's ownership, every
  acknowledged record processed.
- Its Kafka 4.4 twin runs the same roll: the three 3.9 instances form their classic group, and
  Kafka refuses the first 4.4 instance (GROUP_ID_NOT_FOUND, "... is not a streams group"; Kafka
  migrates a Kafka Streams group only offline). The cell fails at once with that as Kafka's
  behaviour, not as a crash or a timeout.

About 55 s on this shared 2-core machine (measured 53 s: a Kafka 4.4 node, six JVMs in the
groupshift cell, four in Kafka's, the two cells in parallel); the jars and the compiled
VerifiableStreams classes are cached after the first run (javac adds some 10-20 s per release
to a first run).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.kafka_dist import tools_missing
from harness.matrix.scenarios import SETTLE_TIMEOUT

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
CELL = "kafka-streams@3.9/classic/streams/dynamic/rolling-upgrade/bidirectional"


def test_streams_rolling_upgrade_cells(tmp_path: Path) -> None:
    missing = tools_missing()
    if missing:
        pytest.skip(f"Kafka Streams cells need Java and the Kafka jars: {missing}")
    args = [sys.executable, "-m", "groupshift", "matrix", "run", "--grid", "streams-smoke", "--jobs", "2"]
    args += ["--only", "scenario=rolling-upgrade", "--out", str(tmp_path)]
    t = time.monotonic()
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    print(proc.stdout[-3000:], proc.stderr[-2000:], f"took {time.monotonic() - t:.0f}s")
    # exit status 1: a cell failed, the Kafka one (its refusal), as the rows below say
    assert proc.returncode == 1, proc.stderr[-3000:]
    doc = json.loads((tmp_path / "results.json").read_text())
    cells = {c["backend"]: c for c in doc["cells"]}
    assert sorted(cells) == ["groupshift", "kafka-4"], doc["cells"]
    for c in cells.values():
        assert c["id"] == f"{CELL}/{c['backend']}"

    ours = cells["groupshift"]
    assert ours["verdict"] == "pass", ours["reason"]
    assert [(s["expect_type"], s["observed_type"]) for s in ours["steps"]] == [
        ("classic", "classic"),
        ("streams", "streams"),
        ("streams", "streams"),
        ("streams", "streams"),
    ]
    assert all(s["seconds_to_full_ownership"] is not None for s in ours["steps"])
    assert ours["versions"]["kafka-streams-3.9"].startswith("3.9.")
    assert ours["versions"]["kafka-streams-4.4"].startswith("4.4.")
    members = ours["members"].values()
    assert sorted((m["client"], m["protocol"]) for m in members) == [
        *[("kafka-streams-3.9", "classic")] * 3,
        *[("kafka-streams-4.4", "streams")] * 3,
    ]
    # every task (partition) ran, each hand-over is in the windows the checks judged
    assert {w["partition"] for w in ours["windows"]} == set(range(6))
    assert ours["figures"]["records"] > 0 and ours["figures"]["handovers"] >= 6

    kafka = cells["kafka-4"]
    assert kafka["verdict"] == "fail"
    assert [(s["expect_type"], s["observed_type"]) for s in kafka["steps"][:1]] == [("classic", "classic")]
    assert kafka["steps"][0]["error"] is None and kafka["steps"][1]["error"] == kafka["reason"]
    assert kafka["reason"].startswith("member 1 restarted as streams: kafka-4 (4.4."), kafka["reason"]
    assert "refused the kafka-streams-4.4 streams member" in kafka["reason"]
    assert "is not a streams group" in kafka["reason"] and "Kafka's behaviour" in kafka["reason"]
    # refused at once, not after the settle timeout (60 s): the cell ended within seconds of it
    assert kafka["duration"] - kafka["steps"][1]["started"] < SETTLE_TIMEOUT - 10, kafka

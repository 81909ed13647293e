"""`groupshift matrix run --grid smoke` end to end, in processes, as CI runs it (about 2 minutes
on a quiet machine, ~16 cells at 2 jobs): every cell passes, the outputs have the documented
shape, and report.html renders in headless Chromium with the grid and the timelines.

Without Java/Maven (no reference Kafka, no Java client) the Kafka-4 and Java cells are left
out, and the test prints why; the groupshift cells of the Python clients still run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest

from harness.headless import ChromiumMissing, chromium, dump_dom, screenshot
from harness.kafka_dist import tools_missing

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "build" / "artifacts"  # gitignored: the screenshot kept for people


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("matrix-smoke")
    args = [sys.executable, "-m", "groupshift", "matrix", "run", "--grid", "smoke", "--jobs", "2"]
    args += ["--out", str(out)]
    missing = tools_missing()
    if missing:
        print(f"matrix smoke without Kafka-4 and Java cells: {missing}")
        args += ["--only", "backend=groupshift,!client=java@*"]
    t = time.monotonic()
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    print(proc.stdout[-4000:], proc.stderr[-2000:], f"smoke grid took {time.monotonic() - t:.0f}s")
    assert proc.returncode in (0, 1), proc.stderr
    return out


def post_mortem(out: Path, cell_id: str) -> str:
    """What a failed cell's members printed, records left out, and the end of their stderr: a CI
    failure on a loaded machine is often not reproducible, so the log must say what happened."""
    cell_dir = out / "work" / "cells" / cell_id.replace("/", "_").replace("@", "-")
    lines = [f"--- post-mortem of {cell_id} ({cell_dir})"]
    for path in sorted((cell_dir / "events").glob("*.jsonl")):
        for raw in path.read_text().splitlines():
            e = json.loads(raw)
            if e.get("name") in ("records_consumed", "offsets_committed"):
                continue
            ps = [p["partition"] for p in e.get("partitions", [])]
            lines.append(f"{e['timestamp'] / 1000:.3f} {path.stem} {e['name']} {ps if ps else ''}")
    lines[1:] = sorted(lines[1:])
    for path in sorted((cell_dir / "stderr").glob("*.stderr")):
        tail = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()][-25:]
        if tail:
            lines.append(f"-- {path.name}:")
            lines += [f"   {ln[:300]}" for ln in tail]
    return "\n".join(lines)


def test_every_smoke_cell_passes(smoke: Path) -> None:
    doc = json.loads((smoke / "results.json").read_text())
    cells = doc["cells"]
    assert doc["grid"] == "smoke" and doc["runtime"] == "process"
    failed = [f"{c['id']}: {c['reason']}" for c in cells if c["verdict"] != "pass"]
    for c in cells:
        if c["verdict"] != "pass":
            print(post_mortem(smoke, c["id"]))
    assert not failed, "\n".join(failed)
    assert doc["summary"] == {"cells": len(cells), "passed": len(cells), "failed": 0}
    for c in cells:
        assert set(c) >= {
            "client",
            "protocol",
            "assignor",
            "static",
            "scenario",
            "policy",
            "backend",
            "reason",
        }
        assert c["steps"] and all(s["seconds_to_full_ownership"] is not None for s in c["steps"])
        assert all(s["observed_type"] == s["expect_type"] for s in c["steps"])
        assert c["figures"]["records"] > 0 and c["windows"]
    if not tools_missing():
        assert len(cells) >= 14 and {c["backend"] for c in cells} == {"groupshift", "kafka-4"}
        assert len({c["scenario"] for c in cells}) == 6
    suite = ET.parse(smoke / "junit.xml").getroot()
    assert suite.get("tests") == str(len(cells)) and suite.get("failures") == "0"


class _Shape(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.verdicts: list[str] = []
        self.titles: list[str] = []
        self.timelines = 0
        self.bars = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        cls = a.get("class") or ""
        if tag == "td" and "verdict" in cls:
            self.verdicts.append(cls.split()[-1])
            self.titles.append(a.get("title") or "")
        if tag == "svg" and "timeline" in cls:
            self.timelines += 1
        if tag == "rect" and cls == "own":
            self.bars += 1


def _shape(text: str) -> _Shape:
    s = _Shape()
    s.feed(text)
    return s


def test_report_has_the_grid_and_timelines(smoke: Path) -> None:
    """The static structure, without a browser (the sibling of the Chromium test)."""
    cells = json.loads((smoke / "results.json").read_text())["cells"]
    s = _shape((smoke / "report.html").read_text())
    assert len(s.verdicts) == len(cells) and set(s.verdicts) == {"pass"}
    assert all(t.startswith("pass: ") for t in s.titles)  # the reason on hover
    assert s.timelines == len(cells) and s.bars > len(cells)


def test_report_renders_in_headless_chromium(smoke: Path, tmp_path: Path) -> None:
    try:
        chromium()
    except ChromiumMissing as e:
        pytest.skip(str(e))
    cells = json.loads((smoke / "results.json").read_text())["cells"]
    dom = dump_dom(smoke / "report.html")
    s = _shape(dom)
    assert len(s.verdicts) == len(cells)
    assert s.timelines == len(cells) and s.bars > len(cells)
    assert 'id="summary"' in dom and f"{len(cells)} cells" in dom
    png = screenshot(smoke / "report.html", tmp_path / "matrix-report.png", size=(1400, 1600))
    assert png.stat().st_size > 10_000  # a rendered page, not a blank one
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(png, ARTIFACTS / "matrix-report.png")


def test_unknown_grid_and_missing_docker_runtime_are_usage_errors(tmp_path: Path) -> None:
    run: Any = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "groupshift", "matrix", *a],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    p = run("run", "--grid", "nope", "--out", str(tmp_path))
    assert p.returncode == 2 and "no built-in grid or file 'nope'" in p.stderr
    p = run("run", "--only", "colour=red", "--out", str(tmp_path))
    assert p.returncode == 2 and "no dimension 'colour'" in p.stderr
    if not (REPO / "harness" / "matrix" / "docker_runtime.py").exists():
        p = run("run", "--runtime", "docker", "--only", "aiokafka", "--out", str(tmp_path))
        assert p.returncode == 2 and "no harness/matrix/docker_runtime.py" in p.stderr

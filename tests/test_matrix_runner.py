"""The matrix runner's pure parts: client command lines, pip requirements, runtime selection,
and the report rendered from result rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.matrix import clients as cl
from harness.matrix.grid import load_grid
from harness.matrix.process_runtime import pip_requirement
from harness.matrix.report import render_html, timeline_svg
from harness.matrix.runner import RuntimeUnavailable, make_runtime, needed_clients
from harness.matrix.runtime import ClientSpec

REPO = Path(__file__).resolve().parent.parent


def test_pip_requirements() -> None:
    assert pip_requirement(ClientSpec("kafka-python", "2.0.2")) == "kafka-python==2.0.2"
    assert pip_requirement(ClientSpec("aiokafka", "0.12.x")) == "aiokafka==0.12.*"
    assert pip_requirement(ClientSpec("confluent-kafka", "2.6")) == "confluent-kafka==2.6.*"
    assert pip_requirement(ClientSpec("confluent-kafka", "newest")) == "confluent-kafka"


def argv(spec: str, protocol: str, tmp_path: Path, **kw: str) -> list[str]:
    return cl.consumer_argv(
        cl.parse_client(spec),
        bootstrap="127.0.0.1:9",
        topic="t",
        group="g",
        protocol=protocol,
        assignor=kw.get("assignor", "range"),
        instance_id=kw.get("instance_id"),
        client_id=kw.get("client_id", "c1"),
        config_dir=tmp_path,
    )


def test_java_command_lines_follow_the_release(tmp_path: Path) -> None:
    old = argv("java@2.1", "classic", tmp_path)
    assert old[:3] == ["VerifiableConsumer", "--broker-list", "127.0.0.1:9"]  # before KIP-499's rename
    assert "--group-protocol" not in old and "org.apache.kafka.clients.consumer.RangeAssignor" in old
    new = argv("java@4", "consumer", tmp_path, instance_id="s1", client_id="c2")
    assert new[1] == "--bootstrap-server" and "--assignment-strategy" not in new
    assert new[new.index("--group-protocol") + 1] == "consumer" and "--group-instance-id" in new
    props = Path(new[new.index("--consumer.config") + 1]).read_text()
    assert "heartbeat.interval.ms" not in props  # the consumer protocol refuses client heartbeats
    assert "heartbeat.interval.ms=250" in Path(old[old.index("--consumer.config") + 1]).read_text()


def test_python_command_line(tmp_path: Path) -> None:
    a = argv("confluent-kafka@2.12", "consumer", tmp_path, assignor="cooperative-sticky")
    assert a[0] == cl.SCRIPT and (REPO / cl.SCRIPT).exists()
    assert a[a.index("--assignor") + 1] == "" and a[a.index("--group-protocol") + 1] == "consumer"


def test_capabilities_and_partners() -> None:
    assert cl.speaks_consumer_protocol(ClientSpec("confluent-kafka", "installed"))
    assert not cl.speaks_consumer_protocol(ClientSpec("confluent-kafka", "2.10"))
    assert cl.speaks_consumer_protocol(ClientSpec("java", "3.7"))
    assert not cl.speaks_consumer_protocol(ClientSpec("java", "3.6"))
    assert cl.partner(ClientSpec("java", "2.1")) == ClientSpec("java", "4")
    # Go: franz-go speaks KIP-848 and is Sarama's consumer-protocol partner
    assert cl.speaks_consumer_protocol(ClientSpec("franz-go", "pinned"))
    assert not cl.speaks_consumer_protocol(ClientSpec("sarama", "pinned"))
    assert cl.partner(ClientSpec("sarama", "pinned")) == ClientSpec("franz-go", "pinned")
    default = load_grid("default")
    assert {c.spec.library for c in default.cells} >= {"franz-go", "sarama"}
    grid = load_grid("smoke")
    assert ClientSpec("confluent-kafka", "installed") in needed_clients(grid.cells)


def test_docker_runtime_is_loaded_lazily(tmp_path: Path) -> None:
    with pytest.raises(RuntimeUnavailable, match="unknown runtime"):
        make_runtime("podman", tmp_path)
    if not (REPO / "harness" / "matrix" / "docker_runtime.py").exists():
        with pytest.raises(RuntimeUnavailable, match=r"no harness/matrix/docker_runtime\.py"):
            make_runtime("docker", tmp_path)
    assert make_runtime("process", tmp_path).name == "process"


def test_report_renders_rows() -> None:
    row = {
        "id": "a@1/classic/range/dynamic/add-remove/bidirectional/groupshift",
        "backend": "groupshift",
        "verdict": "fail",
        "reason": "partition 0 owned by c1 and by c2 <at once>",
        "seconds": 3.0,
        "duration": 3.0,
        "members": {"c1": {"client": "a-1", "protocol": "classic", "instance_id": None}},
        "windows": [{"member": "c1", "partition": 0, "start": 0.5, "end": 2.5}],
        "steps": [{"label": "two members", "started": 0.1, "seconds_to_full_ownership": None}],
        "versions": {"a-1": "1.0"},
    }
    svg = timeline_svg(row)
    assert svg.count('class="own"') == 1 and "never" in svg
    doc = {
        "grid": "g",
        "runtime": "process",
        "finished": "now",
        "wall_seconds": 3.0,
        "summary": {"cells": 1, "passed": 0, "failed": 1},
        "cells": [row],
    }
    page = render_html(doc)
    assert "class='verdict fail'" in page and "&lt;at once&gt;" in page and "<script" not in page
    json.dumps(doc)  # rows stay JSON


def test_timeline_colours_clients_and_hatches_classic_owners() -> None:
    """One colour per client, the same as `groups migration --plot` gives it; classic owners
    hatched (an overlay that is not an ownership bar of its own)."""
    from tools.groups.plot import client_colours

    row = {
        "id": "k@1/classic/range/dynamic/upgrade/bidirectional/groupshift",
        "duration": 4.0,
        "members": {
            "c1": {"client": "kafka-python", "protocol": "classic", "instance_id": None},
            "c2": {"client": "confluent", "protocol": "consumer", "instance_id": None},
            "c3": {"client": "kafka-python", "protocol": "consumer", "instance_id": None},
        },
        "windows": [
            {"member": "c1", "partition": 0, "start": 0.0, "end": 2.0},
            {"member": "c2", "partition": 0, "start": 2.0, "end": 4.0},
            {"member": "c3", "partition": 1, "start": 0.0, "end": 4.0},
        ],
        "steps": [],
    }
    svg = timeline_svg(row)
    colours = client_colours(["kafka-python", "confluent"])
    bars = [line for line in svg.split("<rect") if 'class="own"' in line]
    assert len(bars) == 3
    assert f'fill="{colours["kafka-python"]}"' in bars[0] and f'fill="{colours["kafka-python"]}"' in bars[2]
    assert f'fill="{colours["confluent"]}"' in bars[1]
    assert svg.count('class="classic"') == 1  # c1's window only
    assert 'fill="url(#hatch-k-1-classic-range-dynamic-upgrade-bidirectional-groupshift)"' in svg


def test_cell_of_a_library_not_installed_is_not_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After the README install (groupshift without the test extras) a cell on a library the
    runner cannot import is "not run" with the install command, not a red "fail"; the report
    draws it grey, JUnit counts it as skipped, and the run's exit status stays 0."""
    import harness.matrix.process_runtime as process_runtime
    from groupshift.cli import main as groupshift_main
    from harness.matrix.runtime import NOT_RUN

    monkeypatch.setitem(process_runtime.PYTHON_MODULES, "aiokafka", "no_such_module_for_the_matrix")
    grid_file = tmp_path / "grid.toml"
    grid_file.write_text(
        'name = "missing"\nreference = "kafka-4"\n\n[[cells]]\n'
        'clients = ["aiokafka@installed"]\nassignors = ["roundrobin"]\nscenarios = ["add-remove"]\n'
    )
    out = tmp_path / "out"
    status = groupshift_main(["matrix", "run", "--grid", str(grid_file), "--out", str(out)])
    doc = json.loads((out / "results.json").read_text())
    assert doc["cells"] and {r["verdict"] for r in doc["cells"]} == {NOT_RUN}
    reason = doc["cells"][0]["reason"]
    assert reason.startswith("not run: aiokafka is not installed") and "-m pip install aiokafka" in reason
    assert doc["summary"]["failed"] == 0 and doc["summary"]["not_run"] == len(doc["cells"])
    assert status == 0
    page = (out / "report.html").read_text()
    assert "class='verdict not-run'" in page and "class='verdict fail'" not in page
    assert "id='legend'" in page and "pip install aiokafka" in page
    junit_xml = (out / "junit.xml").read_text()
    assert "<skipped" in junit_xml and 'failures="0"' in junit_xml

"""The loader rules (`tools.check.loader_rules`), proven on the real releases.

One broker per target (`e2e.downgrade_probe`): `__consumer_offsets` gets one partition per
record kind, the broker restarts on those files and every case's outcome is compared with the
row `loader_rules.outcome` gives: `read` (the partition loads and the case group's offsets or
group are there), `skipped` (the partition loads, the broker logs that it ignored the record,
the record's group is absent unless its offsets made it), `fatal` (the failure predicted: the old
coordinator logs "Error loading offsets from" and serves the partition empty; 4.x logs "Failed to
load metadata from" and answers NOT_COORDINATOR). Every row marked proven is hit by a case.

Each target takes one broker start and two restarts: about 7 s (3.7, 3.9) to 20 s (3.4.0, 4.x)
on a quiet machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.downgrade_probe import (
    CASES,
    PROBE_CONFIGS,
    TOPIC,
    CaseResult,
    observe,
    prepare_cluster,
    wait_partition_dirs,
    write_cases,
)
from harness.kafka_dist import KafkaCluster
from tests.plugins.kafka import skip_without_tools
from tools.check.loader_rules import (
    OTHER,
    RULES,
    TARGET_CONFIGS,
    TARGET_LOADERS,
    TARGET_RELEASES,
    Rule,
    outcome,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

NUM_PARTITIONS = 20


def _rule_for(target: str, result: CaseResult) -> Rule:
    return outcome(target, result.case.record_type, result.case.value_version)


def _check(target: str, r: CaseResult) -> None:
    rule = _rule_for(target, r)
    expected = "fatal" if rule.needs_group and not r.case.creates_group else rule.outcome
    what = f"{target} {r.case.name} (rule: {expected}, {rule.note})"
    new_coordinator = TARGET_LOADERS[target] == "runtime"
    if expected == "fatal":
        assert not r.loaded, what
        if new_coordinator:
            assert r.error is not None and "NOT_COORDINATOR" in r.error, what
            assert any("Failed to load metadata from" in ln for ln in r.log_lines), (what, r.log_lines)
        else:
            # the partition is served, empty: the probe group's offsets before the record are gone
            assert r.probe_offsets == {}, what
            assert any("Error loading offsets from" in ln for ln in r.log_lines), (what, r.log_lines)
        return
    assert r.loaded, (what, r.error, r.log_lines)
    if r.case.offsets is not None:
        assert r.group_offsets == dict(r.case.offsets), what
    if expected == "skipped":
        phrase = "Unknown message key with version" if not new_coordinator else "Unknown record type"
        assert any(phrase in ln for ln in r.log_lines), (what, r.log_lines)
        if r.case.offsets is None:
            assert r.listed is None, what  # nothing of the group was loaded
        else:
            assert r.listed is not None and r.listed["state"] == "Empty", what  # offsets only
        return
    # read
    rt = r.case.record_type
    ignored = (f"record type {rt} while", f"key with version {rt} while")
    assert not any(p in ln for ln in r.log_lines for p in ignored), (what, r.log_lines)
    if r.case.record_type in (3, 4, 5, 6, 7, 8, 16) and r.case.value_version is not None:
        assert r.listed is not None and r.listed["type"] == "consumer", (what, r.listed)
    if r.case.record_type == 2:
        assert r.listed is not None and r.listed["protocol_type"] == "consumer", (what, r.listed)


@pytest.mark.parametrize("target", list(TARGET_RELEASES))
def test_loader_rules(target: str, tmp_path: Path) -> None:
    """Every target runs, also those whose loader another target shares (3.7 and 3.9: the same
    KIP-915 GroupMetadataManager; 4.0 and 4.4: the same CoordinatorRuntime loader): a row marked
    proven is proven on its own release, about 30 s for the two."""
    skip_without_tools()
    configs = {
        **PROBE_CONFIGS,
        **TARGET_CONFIGS.get(target, {}),
        "offsets.topic.num.partitions": str(NUM_PARTITIONS),
    }
    with KafkaCluster(TARGET_RELEASES[target], configs=configs, workdir=tmp_path / "kafka") as cluster:
        cluster.start()
        prepare_cluster(cluster)
        wait_partition_dirs(cluster, NUM_PARTITIONS)
        cluster.kill_broker(0)  # SIGKILL: seconds faster than a controlled shutdown
        write_cases(cluster.nodes[0].data_dir, NUM_PARTITIONS)
        cluster.start_broker(0)
        results = observe(cluster, NUM_PARTITIONS)
        cluster.kill_broker(0)  # thrown away: no controlled shutdown either
    hit: set[Rule] = set()
    for r in results:
        _check(target, r)
        hit.add(_rule_for(target, r))
    proven = {rule for rule in RULES if rule.target == target and rule.proven}
    assert proven <= hit, sorted((r.record_type, r.versions) for r in proven - hit)
    assert all(rule.pinned_by.endswith(f"[{target}]") for rule in proven)
    assert TOPIC and OTHER == -1 and len(CASES) < NUM_PARTITIONS

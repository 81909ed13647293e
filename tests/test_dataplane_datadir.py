"""Start-up that cannot destroy, below the process: the data directory's `.lock`, stray partition
directories renamed aside, refusals naming a damaged `topics.json` / `meta.properties`, and
DeleteTopics removing only its own topic's directories (gateway.dataplane.datadir, plane)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from gateway.config import MAX_SHOWN_CHARS, ConfigError, build_config, shown_value
from gateway.dataplane.datadir import (
    DataDirError,
    DataDirLock,
    DataDirLockedError,
    is_delete_dir,
)
from gateway.dataplane.plane import DataPlane
from gateway.dataplane.topics import TopicRegistry, TopicsFileError
from tests.record_batches import make_batch


def _plane_with_records(data_dir: Path, topic: str = "orders", partitions: int = 2) -> None:
    async def run() -> None:
        plane = DataPlane(data_dir)
        plane.create_topic(topic, partitions)
        for i in range(partitions):
            p = plane.partition(topic, i)
            assert p is not None
            p.append(make_batch([b"kept-%d" % i]))
            await p.make_durable()
        await plane.close()

    asyncio.run(run())


def test_the_lock_is_exclusive_names_its_holder_and_goes_with_close(tmp_path: Path) -> None:
    first = DataDirLock.acquire(tmp_path / "data")
    with pytest.raises(
        DataDirLockedError, match=rf"is in use by another open log: process {os.getpid()} holds "
    ):
        DataDirLock.acquire(tmp_path / "data")
    first.release()
    DataDirLock.acquire(tmp_path / "data").release()


def test_a_second_plane_on_a_locked_directory_reads_and_changes_nothing(tmp_path: Path) -> None:
    _plane_with_records(tmp_path)
    (tmp_path / "topics.json").write_text('{"version": 1, "topics": []}')  # would orphan orders-*
    held = DataDirLock.acquire(tmp_path)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(DataDirLockedError):
        DataPlane(tmp_path)
    assert sorted(os.listdir(tmp_path)) == before
    held.release()


def test_unowned_partition_directories_are_renamed_aside_never_deleted(tmp_path: Path) -> None:
    _plane_with_records(tmp_path)
    configs = json.loads((tmp_path / "configs.json").read_text())
    configs["topics"] = {"orders": {"retention.ms": "1000"}, "never-created": {"retention.ms": "1"}}
    (tmp_path / "configs.json").write_text(json.dumps(configs))
    doc = json.loads((tmp_path / "topics.json").read_text())
    doc["topics"][0]["name"] = "ordars"  # one letter changed
    (tmp_path / "topics.json").write_text(json.dumps(doc))

    async def run() -> None:
        plane = DataPlane(tmp_path)
        await plane.close()

    asyncio.run(run())
    asyncio.run(run())  # a second start with the strays already aside
    # The configs of a topic whose data is kept aside are kept too; of one with no data, not.
    assert json.loads((tmp_path / "configs.json").read_text())["topics"] == {
        "orders": {"retention.ms": "1000"}
    }
    strays = sorted(p.name for p in tmp_path.glob("*-stray"))
    assert [s.partition(".")[0] for s in strays] == ["orders-0", "orders-1"]
    for s in strays:
        assert (tmp_path / s / "partition.metadata").exists()
        assert any(f.suffix == ".log" and f.stat().st_size > 0 for f in (tmp_path / s).iterdir())


def test_a_damaged_or_lost_registry_is_refused_with_the_file_named(tmp_path: Path) -> None:
    _plane_with_records(tmp_path)
    registry = tmp_path / "topics.json"
    good = registry.read_text()
    for text, problem in (
        ("{", "not JSON"),
        ("[]", 'expected an object with a "topics" list'),
        ('{"topics": [{"name": "a b", "topic_id": "x", "partitions": 1}]}', "not a legal topic name"),
        (good.replace('"partitions": 2', '"partitions": 0'), "partitions is not a positive integer"),
    ):
        registry.write_text(text)
        with pytest.raises(TopicsFileError, match=problem):
            TopicRegistry.load(tmp_path)
        with pytest.raises(DataDirError, match=rf"{registry} is damaged \(.*{problem}.*--ignore-topics-file"):
            DataPlane(tmp_path)
    registry.unlink()
    with pytest.raises(DataDirError, match=rf"{registry} is missing but .* holds 2 partition directories"):
        DataPlane(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["orders-0", "orders-1"]
    DataDirLock.acquire(tmp_path).release()  # every refusal let the lock go


def test_ignore_topics_file_keeps_the_file_and_the_partitions_aside(tmp_path: Path) -> None:
    _plane_with_records(tmp_path)
    (tmp_path / "topics.json").write_text("garbage")

    async def run() -> None:
        plane = DataPlane(tmp_path, ignore_topics_file=True)
        assert len(plane.topics) == 0
        await plane.close()

    asyncio.run(run())
    [kept] = tmp_path.glob("topics.json.*-damaged")
    assert kept.read_text() == "garbage"
    assert json.loads((tmp_path / "topics.json").read_text())["topics"] == []
    assert len(list(tmp_path.glob("orders-*.*-stray"))) == 2


def test_a_new_data_directory_gets_its_registry_at_once(tmp_path: Path) -> None:
    async def run() -> None:
        await DataPlane(tmp_path).close()

    asyncio.run(run())
    assert json.loads((tmp_path / "topics.json").read_text())["topics"] == []


def test_a_damaged_meta_properties_is_refused_with_the_file_named(tmp_path: Path) -> None:
    _plane_with_records(tmp_path)
    meta = tmp_path / "meta.properties"
    for text, problem in (
        ("version=1\nnode.id=0\n", "no cluster.id"),
        ("version=1\ncluster.id=abc\nnode.id=x\n", "node.id is not a number"),
    ):
        meta.write_text(text)
        with pytest.raises(DataDirError, match=rf"{meta} is damaged \({problem}"):
            DataPlane(tmp_path)
    meta.write_bytes(b"\xff\xfe")
    with pytest.raises(DataDirError, match="cannot be read"):
        DataPlane(tmp_path)


def test_delete_topics_removes_only_directories_of_the_deleted_topic(tmp_path: Path) -> None:
    async def run() -> None:
        plane = DataPlane(tmp_path)
        plane.create_topic("gone", 2)
        # A directory of that name that another topic id owns (not the deleted topic's data).
        (tmp_path / "gone-1" / "partition.metadata").write_text(
            "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n"
        )
        await plane.delete_topic("gone")
        await plane.close()

    asyncio.run(run())
    assert not (tmp_path / "gone-0").exists()
    assert [p.name.partition(".")[0] for p in tmp_path.glob("*-stray")] == ["gone-1"]
    assert is_delete_dir("gone-0.0123456789abcdef0123456789abcdef-delete")
    assert not is_delete_dir("gone-delete") and not is_delete_dir("gone-0.x-delete")


def test_long_config_values_are_cut_in_errors() -> None:
    assert shown_value("x" * 5) == "'xxxxx'"
    cut = shown_value("x" * 20_000_000)
    assert cut.endswith("...(20000000 characters)") and len(cut) < MAX_SHOWN_CHARS + 40
    with pytest.raises(ConfigError) as e:
        build_config({"num.partitions": "9" * 100_000 + "x"})
    assert len(str(e.value)) < 600 and "...(100001 characters)" in str(e.value)
    with pytest.raises(ConfigError) as e:
        build_config({"listeners": "h" * 50_000})
    assert len(str(e.value)) < 600
    assert len(str(ConfigError("y" * 5000))) < 1100

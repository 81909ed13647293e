"""The inputs of `groupshift fleet report`: `NAME=PATH` arguments, each tagged with its cluster.

PATH may be:

* a groupshift data dir (`PATH/coordinator/__consumer_offsets-N/*.log`, as `groupshift serve`
  and `groupshift fleet synth` write it), a Kafka broker's log directory
  (`PATH/__consumer_offsets-N/*.log`, Kafka 3.x and 4.x alike) or one `__consumer_offsets-N`
  directory (its partition number read from the name); Kafka's other files (indexes, snapshots,
  checkpoints) are ignored. In a directory, `*.jsonl` files are event logs, `settings.json` the
  broker settings the cluster runs with (`{"group.consumer.migration.policy": "upgrade", ...}`,
  what the verdicts are judged against; Kafka 4.x's defaults otherwise) and `topics.json` the
  server's topic registry (`{"version": 1, "topics": [{"name", "topic_id", "partitions"}]}`,
  read by the server's own parser, gateway.dataplane.topics) naming the topic ids of consumer
  groups' assignments; the topic directories' `partition.metadata` files (Kafka's
  `PartitionMetadataFile`, which groupshift writes too) name them as well;
* a file: an event log (groupshift's JSON lines, e.g. `groupshift serve 2> events.jsonl`);
* a bare PATH that holds none of these but sub-directories that do (the directory `groupshift
  fleet synth --out DIR` wrote, one `cluster-NN` folder per cluster): one cluster per
  sub-directory, tagged with its name.

A bare PATH is tagged with its directory name. The same NAME may be given several times (a data
dir and an event log kept elsewhere). A `settings.json` or `topics.json` that cannot be read does
not stop the report: it becomes a row of the `problems` table (the file and what is wrong).
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from gateway.dataplane.topics import TOPICS_FILE, TopicRegistry, TopicsFileError
from records.dump import OFFSETS_LOG_PREFIX, offsets_logs
from records.segment import SEGMENT_SUFFIX, parse_segment_name


class InputError(ValueError):
    """An input that cannot be read; the command prints it and exits 2."""


@dataclass
class Cluster:
    name: str
    segments: list[tuple[int, str]] = field(default_factory=list)  # (partition, segment file)
    events: list[str] = field(default_factory=list)
    settings: dict[str, str | None] = field(default_factory=dict)
    topic_names: dict[str, str] = field(default_factory=dict)  # topic id (str) -> name
    problems: list[tuple[str, str]] = field(default_factory=list)  # (file, what is wrong)

    def topic_ids(self) -> dict[uuid.UUID, str]:
        return {uuid.UUID(k): v for k, v in self.topic_names.items()}


def _segments(directory: str) -> list[str]:
    names = sorted(n for n in os.listdir(directory) if parse_segment_name(n, SEGMENT_SUFFIX) is not None)
    return [os.path.join(directory, n) for n in names]


def _read_settings(path: str) -> dict[str, str]:
    """`settings.json`: `{broker setting: value}`; `ValueError` saying what is wrong."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise ValueError(f"cannot be read: {e.strerror or e}") from None
    except ValueError as e:
        raise ValueError(f"not JSON: {e}") from None
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object of broker settings")
    return {str(k): str(v) for k, v in data.items()}


def registry_topic_ids(data_dir: str) -> dict[str, str]:
    """{topic id: name} from a groupshift data dir's `topics.json`, parsed by the server's own
    code (`TopicRegistry.load`); `TopicsFileError` when the file is not a registry."""
    return {str(t.topic_id): t.name for t in TopicRegistry.load(Path(data_dir)).all()}


def _is_input(path: str) -> bool:
    """Whether a directory holds something `discover` reads (segments or an event log)."""
    base = os.path.basename(path)
    if base.startswith(OFFSETS_LOG_PREFIX) and base[len(OFFSETS_LOG_PREFIX) :].isdigit():
        return True
    if offsets_logs(path):
        return True
    return any(n.endswith(".jsonl") for n in os.listdir(path))


def _expand(spec: str) -> list[str]:
    """A bare directory of cluster directories (`fleet synth --out DIR`) as one spec each."""
    if "=" in spec or not os.path.isdir(spec):
        return [spec]
    try:
        if _is_input(spec):
            return [spec]
        subs = [os.path.join(spec, n) for n in sorted(os.listdir(spec))]
        found = [f"{os.path.basename(p)}={p}" for p in subs if os.path.isdir(p) and _is_input(p)]
    except OSError:
        return [spec]
    return found or [spec]


def kafka_topic_ids(log_dir: str) -> dict[str, str]:
    """{topic id: name} from a Kafka log dir's `<topic>-<partition>/partition.metadata` files
    (Kafka `PartitionMetadataFile`: `version: 0` / `topic_id: <base64 Uuid>`), so consumer
    groups read from a broker's disk get their topic names without a topics.json."""
    import base64

    out: dict[str, str] = {}
    try:
        names = os.listdir(log_dir)
    except OSError:
        return out
    for n in names:
        topic, _, p = n.rpartition("-")
        meta = os.path.join(log_dir, n, "partition.metadata")
        if not topic or not p.isdigit() or not os.path.isfile(meta):
            continue
        try:
            with open(meta) as f:
                fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
            raw = fields["topic_id"].strip()
            tid = uuid.UUID(bytes=base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
        except (OSError, KeyError, ValueError):
            continue
        out[str(tid)] = topic
    return out


def discover(specs: list[str]) -> list[Cluster]:
    """The clusters of the command's arguments; `InputError` (one line) when one cannot be read
    at all."""
    try:
        return _discover([s for spec in specs for s in _expand(spec)])
    except OSError as e:
        raise InputError(f"{e.filename or ''}: {e.strerror or e}") from None


def _discover(specs: list[str]) -> list[Cluster]:
    clusters: dict[str, Cluster] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            path = spec
            name = os.path.basename(os.path.normpath(spec))
        if not name or not path:
            raise InputError(f"{spec!r}: expected NAME=PATH")
        path = os.path.abspath(path)
        c = clusters.setdefault(name, Cluster(name))
        if os.path.isfile(path):
            c.events.append(path)
            continue
        if not os.path.isdir(path):
            raise InputError(f"{spec}: {path} is neither a directory nor a file")
        found = False
        base = os.path.basename(path)
        if base.startswith(OFFSETS_LOG_PREFIX) and base[len(OFFSETS_LOG_PREFIX) :].isdigit():
            c.segments += [(int(base[len(OFFSETS_LOG_PREFIX) :]), s) for s in _segments(path)]
            found = True
        for partition, directory in offsets_logs(path) or []:
            c.segments += [(partition, s) for s in _segments(directory)]
            found = True
        for n in sorted(os.listdir(path)):
            p = os.path.join(path, n)
            if n.endswith(".jsonl") and os.path.isfile(p):
                c.events.append(p)
                found = True
        c.topic_names.update(kafka_topic_ids(path))
        settings = os.path.join(path, "settings.json")
        if os.path.isfile(settings):
            try:
                c.settings.update(_read_settings(settings))
            except ValueError as e:
                c.problems.append((settings, f"{e}; the verdicts assume Kafka's default settings"))
        if os.path.isfile(os.path.join(path, TOPICS_FILE)):
            try:
                c.topic_names.update(registry_topic_ids(path))
            except TopicsFileError as e:
                c.problems.append((str(e.path), f"not read: {e.problem}"))
        if not found:
            raise InputError(f"{spec}: no __consumer_offsets-N segments and no *.jsonl event log in {path}")
    return list(clusters.values())

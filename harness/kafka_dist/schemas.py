"""Kafka's message schemas (`common/message/*.json`) as shipped inside its jars.

Kafka generates its protocol and record classes from JSON schemas and packages the JSON files
as resources: the request/response schemas in `kafka-clients`, the group coordinator's records
(`OffsetCommitKey`, `ConsumerGroupMemberMetadataValue`, ...) in `kafka-group-coordinator`. Read
from a resolved release, they are the reference for any hand-written layout at that release.
The files carry `//` line comments (the license header), which are stripped before parsing.
"""

from __future__ import annotations

import json
import re
import zipfile
from typing import Any

from harness.kafka_dist.maven import KafkaDist

MESSAGE_DIR = "common/message"
_COMMENT = re.compile(r"(?m)^\s*//.*$")


def _schema_jars(dist: KafkaDist) -> list[zipfile.Path]:
    return [zipfile.Path(jar, f"{MESSAGE_DIR}/") for jar in dist.jars() if jar.name.startswith("kafka")]


def message_schema(dist: KafkaDist, name: str) -> dict[str, Any] | None:
    """The parsed JSON schema `name` (e.g. "OffsetCommitValue") of this release, or None."""
    for directory in _schema_jars(dist):
        entry = directory / f"{name}.json"
        if entry.exists():
            loaded: dict[str, Any] = json.loads(_COMMENT.sub("", entry.read_text()))
            return loaded
    return None


def message_schema_names(dist: KafkaDist) -> list[str]:
    """Every schema name the release's jars ship."""
    names: set[str] = set()
    for directory in _schema_jars(dist):
        if directory.exists():
            names.update(
                p.name.removesuffix(".json") for p in directory.iterdir() if p.name.endswith(".json")
            )
    return sorted(names)

"""Member ids. Randomness is injected so that the engine stays deterministic under test.

Consumer-protocol member ids are Kafka `Uuid.randomUuid().toString()`: the 16 UUID bytes in
URL-safe base64 without padding (22 characters). Classic member ids are
`{clientId}-{java UUID}` or `{instanceId}-{java UUID}` (the 36-character dashed form).
"""

from __future__ import annotations

import base64
import random
import uuid
from typing import Protocol


class IdSource(Protocol):
    def random_bytes16(self) -> bytes: ...


class SeededIds:
    """Deterministic ids from a seed (tests, simulator, replay checks)."""

    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)

    def random_bytes16(self) -> bytes:
        return self._rng.getrandbits(128).to_bytes(16, "big")


class SystemIds:
    """Ids from the operating system's randomness (the gateway's source)."""

    def random_bytes16(self) -> bytes:
        return uuid.uuid4().bytes


def kafka_uuid_string(raw: bytes) -> str:
    """Kafka `Uuid.toString()`: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def consumer_member_id(ids: IdSource) -> str:
    # Kafka never hands out a Uuid whose string starts with '-' (Uuid.randomUuid retries).
    while True:
        s = kafka_uuid_string(ids.random_bytes16())
        if not s.startswith("-"):
            return s


def classic_member_id(prefix: str, ids: IdSource) -> str:
    return f"{prefix}-{uuid.UUID(bytes=ids.random_bytes16(), version=4)}"

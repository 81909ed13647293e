"""Errors of the storage layer: record-batch format errors and segment-log errors.

They live in one module so that the gateway can map them to Kafka error codes in one place:

| error                    | Kafka error code (produce path)           |
|--------------------------|-------------------------------------------|
| `CorruptBatchError`      | CORRUPT_MESSAGE (2)                       |
| `InvalidBatchError`      | INVALID_RECORD (87)                       |
| `UnsupportedBatchError`  | (internal; the data plane never decodes)  |
| `OffsetOutOfRangeError`  | OFFSET_OUT_OF_RANGE (1) on fetch          |
| `LogFailedError`         | KAFKA_STORAGE_ERROR (56)                  |

`BatchError` subclasses `ValueError`: every one of them means "these bytes are not acceptable",
never "the program is broken".
"""

from __future__ import annotations


class BatchError(ValueError):
    """A record batch could not be read or is not acceptable.

    `position` is the byte position of the batch in the buffer (or file) that was being read,
    `offset` its base offset when the header was readable (else None), `reason` a short
    human-readable cause.
    """

    def __init__(self, reason: str, *, position: int = 0, offset: int | None = None) -> None:
        self.reason = reason
        self.position = position
        self.offset = offset
        where = f"batch at position {position}"
        if offset is not None:
            where += f", base offset {offset}"
        super().__init__(f"{reason} ({where})")


class CorruptBatchError(BatchError):
    """The bytes are not a well-formed magic-2 record batch (bad size, magic, CRC or records)."""


class InvalidBatchError(BatchError):
    """A well-formed batch that a broker must refuse from a client (Kafka `LogValidator` rules)."""


class UnsupportedBatchError(BatchError):
    """A valid batch this code does not decode (compressed record payloads)."""


class LogError(Exception):
    """Base class of segment-log errors."""


class LogCorruptionError(LogError):
    """Corruption found while opening a log that is not a torn tail: startup must stop.

    Carries the segment `file`, the byte `position` of the bad batch in it and the `reason`.
    """

    def __init__(self, file: str, position: int, reason: str) -> None:
        self.file = file
        self.position = position
        self.reason = reason
        super().__init__(f"log corruption in {file} at byte position {position}: {reason}")


class OffsetOutOfRangeError(LogError):
    """A read asked for an offset below the log start or beyond the log end."""

    def __init__(self, offset: int, start_offset: int, end_offset: int) -> None:
        self.offset = offset
        self.start_offset = start_offset
        self.end_offset = end_offset
        super().__init__(f"offset {offset} is out of range [{start_offset}, {end_offset}] of this log")


class LogFailedError(LogError):
    """The log refused an operation: it is closed, or an earlier write/fsync failed.

    After a failed fsync the kernel may have dropped dirty pages, so the file no longer tells
    what is durable; the only safe continuation is to close the log and open it again (which
    re-runs recovery). Every operation after such a failure raises this error.
    """


class CompactionError(LogError):
    """A log cannot be compacted (compressed or control batches, records without a key)."""


class LogLockedError(LogError):
    """Another SegmentLog (in this or another process) holds the directory lock."""

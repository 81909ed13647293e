"""Build Kafka v2 record batches for gateway tests (through kio's batch writer)."""

from __future__ import annotations

import datetime
import io

from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch


def make_batch(
    values: list[bytes],
    *,
    timestamps_ms: list[int] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
) -> bytes:
    stamps = timestamps_ms or [1_700_000_000_000 + i for i in range(len(values))]
    records = tuple(
        Record(
            attributes=0,
            timestamp=datetime.datetime.fromtimestamp(ts / 1000, tz=datetime.UTC),
            offset=i,
            key=f"k{i}".encode(),
            value=v,
            headers=(),
        )
        for i, (v, ts) in enumerate(zip(values, stamps, strict=True))
    )
    buf = io.BytesIO()
    write_new_batch(
        buf,
        NewRecordBatch(
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            records=records,
            attributes=attributes,
        ),
    )
    return buf.getvalue()

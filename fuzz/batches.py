"""Target `batches`: record batches as the coordinator loader and the data plane read them.

Two readers of Kafka's v2 batch format (`records.batch`), picked by the input's first byte:

* the coordinator log loader (`gateway.coordinator_storage`): `read_batch_header`, then
  `iter_raw_records` over the batch and `decode_record` on every key/value. The CRC is not
  checked here (the segment reader checks it before), so mutations reach the record framing.
  Clean: `BatchError` (a corrupt batch: the segment is truncated there, as Kafka's log
  recovery does), `CoordinatorRecordError` (see the `records` target), `NoKey` (the loader
  refuses a keyless record with `CoordinatorLoadError`).
* Produce (`records.log.SegmentLog.append_client_batch`): `validate_client_batch` on a batch a
  client sent. Clean: `BatchError` (CORRUPT_MESSAGE / INVALID_RECORD to the producer).

Seeds: batches of real coordinator records (see `fuzz.records`) built with `build_batch`.
"""

from __future__ import annotations

from fuzz.common import Target
from fuzz.records import encoded_records
from records.batch import build_batch, iter_raw_records, read_batch_header, validate_client_batch
from records.codec import CoordinatorRecordError, decode_record
from records.errors import BatchError


class NoKey(Exception):
    """A coordinator record without a key (the loader's `CoordinatorLoadError`)."""


def seeds() -> list[bytes]:
    recs = list(encoded_records())
    out = []
    for i in range(0, len(recs), 5):
        chunk = recs[i : i + 5]
        batch = build_batch(chunk, base_offset=i, timestamp_ms=1_700_000_000_000 + i)
        out.append(b"\x00" + batch)
        if i % 25 == 0:
            out.append(b"\x01" + build_batch([(None, b"value")], timestamp_ms=1_700_000_000_000))
    return out


def one_input(data: bytes) -> None:
    if not data:
        return
    raw = data[1:]
    if data[0] & 1:
        validate_client_batch(raw)
        return
    header = read_batch_header(raw)
    for _od, _td, key, value, _headers in iter_raw_records(raw, 0, header):
        if key is None:
            raise NoKey
        decode_record(key, value)


TARGET = Target(
    name="batches",
    doc=__doc__ or "",
    seeds=seeds,
    one_input=one_input,
    clean=(BatchError, CoordinatorRecordError, NoKey),
    instrument=("records.batch", "records.codec", "records.consumer_group_codec", "records.wire"),
)

"""Child process of the SIGKILL test (tests/test_log_crash.py): appends forever.

Usage: python -m tests.log_crash_child DIR SEED GROUP

Opens the log, prints "ready", then loops: append GROUP operations (one batch each, 1-5
records, mostly small values, now and then a big one so that a kill can land inside a long
write), sync(), print the last offset now durable. A line is printed only after sync() has
returned, so every printed offset is acknowledged. The content of each record is a function of
its offset (`expected_key`, `expected_value`), so the parent can check it after any crash.
"""

from __future__ import annotations

import random
import sys

from records.log import SegmentLog

SEGMENT_BYTES = 2 * 1024 * 1024


def expected_key(offset: int) -> bytes:
    return b"key-%d" % offset


def expected_value(offset: int, length: int) -> bytes:
    unit = b"%d," % offset
    return (unit * (length // len(unit) + 1))[:length]


def main() -> None:
    path, seed, group = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    log = SegmentLog.open(path, segment_bytes=SEGMENT_BYTES, fsync_policy="batch")
    print("ready", flush=True)
    while True:
        for _ in range(group):
            base = log.end_offset
            records = []
            for j in range(rng.randint(1, 5)):
                big = rng.random() < 0.04
                length = rng.randint(50_000, 600_000) if big else rng.randint(0, 400)
                records.append((expected_key(base + j), expected_value(base + j, length)))
            log.append_records(records, timestamp_ms=1_700_000_000_000 + base)
        log.sync()
        sys.stdout.write(f"{log.durable_offset - 1}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

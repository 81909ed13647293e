"""Hostile or broken bytes on raw sockets: each gets Kafka's answer or a closed connection, the
process survives, and a real consumer on another connection keeps consuming without a gap.
"""

from __future__ import annotations

import itertools
import random
import struct
import threading
import time
from collections.abc import Callable

import pytest

from e2e.harness import GatewayProcess
from protocol.client import WireClient, make_request

UNSUPPORTED_VERSION = 35


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def header_v1(api_key: int, version: int, correlation_id: int = 7) -> bytes:
    client_id = b"bad-input"
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


def header_v2(api_key: int, version: int, correlation_id: int = 7) -> bytes:
    return header_v1(api_key, version, correlation_id) + b"\x00"  # no tagged fields


def assert_closed(gw: GatewayProcess, data: bytes) -> None:
    with WireClient(gw.port, timeout=5) as c:
        c.send_raw(data)
        assert c.closed_by_server(), f"connection stayed open after {data[:24]!r}"


class SteadyTraffic:
    """A producer and a consumer (librdkafka) moving one record every few ms in the background."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.sent = 0
        self.received: list[tuple[float, int]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]

    def __enter__(self) -> SteadyTraffic:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(15)

    def _produce(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0, "acks": "all"})
        while not self._stop.is_set():
            p.produce(
                self.topic,
                value=str(self.sent).encode(),
                partition=0,
                on_delivery=lambda err, _m: err and self.errors.append(str(err)),
            )
            self.sent += 1
            p.poll(0.005)
        p.flush(10)

    def _consume(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "steady-assign-only",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 50,
            }
        )
        c.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        deadline = None
        while True:
            if self._stop.is_set():
                deadline = deadline or time.monotonic() + 10
                if len(self.received) >= self.sent or time.monotonic() > deadline:
                    break
            for m in c.consume(num_messages=100, timeout=0.05):
                if m.error():
                    self.errors.append(str(m.error()))
                else:
                    self.received.append((time.monotonic(), int(m.value())))
        c.close()

    def wait_flowing(self, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while len(self.received) < 20:
            assert time.monotonic() < deadline, f"traffic never started: {self.errors}"
            time.sleep(0.05)


def cases(gw: GatewayProcess) -> list[tuple[str, Callable[[], None]]]:
    rng = random.Random(20261121)

    def random_bytes() -> None:
        # A plausible size prefix followed by noise: no valid request can come out of it.
        noise = bytes([0x7F, 0x00]) + rng.randbytes(126)  # api key 32512: unknown
        assert_closed(gw, frame(noise))

    def truncated_then_close() -> None:
        with WireClient(gw.port) as c:
            c.send_raw(struct.pack(">i", 100) + header_v1(18, 0)[:6])

    def negative_size() -> None:
        assert_closed(gw, struct.pack(">i", -5) + b"\x00" * 16)

    def huge_size() -> None:
        # Refused from the four size bytes alone, before any payload arrives.
        assert_closed(gw, struct.pack(">i", 2**31 - 1))

    def unknown_api_key() -> None:
        assert_closed(gw, frame(header_v1(9999, 0)))

    def unimplemented_api_key() -> None:
        assert_closed(gw, frame(header_v1(25, 1) + b"\x00\x00\x00\x00\x00"))  # AddOffsetsToTxn (not served)

    def unsupported_version() -> None:
        assert_closed(gw, frame(header_v2(3, 14) + b"\x01\x01\x00\x00"))  # Metadata v14
        assert_closed(gw, frame(header_v1(1, 3)))  # Fetch v3 (below our v4)

    def api_versions_above_max() -> None:
        with WireClient(gw.port) as c:
            c.send_raw(frame(header_v2(18, 99, correlation_id=42) + b"garbage"))
            answer = c.read_frame()
            assert answer is not None
            correlation_id, error_code, count = struct.unpack_from(">ihi", answer)
            api_key, lo, hi = struct.unpack_from(">hhh", answer, 10)
            assert (correlation_id, error_code, count) == (42, UNSUPPORTED_VERSION, 1)
            assert (api_key, lo, hi) == (18, 0, 4)
            ok = c.request(make_request(18, 3, client_software_name="e2e", client_software_version="1"))
            assert ok.error_code == 0 and any(k.api_key == 1 for k in ok.api_keys)

    def malformed_body() -> None:
        # Metadata v1: one topic whose name claims 300 bytes but 3 follow.
        assert_closed(gw, frame(header_v1(3, 1) + struct.pack(">ih", 1, 300) + b"abc"))

    def array_length_bomb() -> None:
        # Metadata v13 with a compact array length of 2**32-2 in 5 bytes: kio alone would try
        # to allocate ~34 GB and abort the whole process.
        assert_closed(gw, frame(header_v2(3, 13) + b"\xff\xff\xff\xff\x0f"))
        assert_closed(gw, frame(header_v1(3, 1) + struct.pack(">i", 2**31 - 1)))

    def acks_zero_failure() -> None:
        produce = make_request(
            0,
            9,
            transactional_id=None,
            acks=0,
            timeout=1000,
            topic_data=[{"name": "steady", "partition_data": [{"index": 0, "records": b"not a batch"}]}],
        )
        with WireClient(gw.port) as c:
            c.send(produce)
            assert c.closed_by_server()

    return [
        ("random bytes", random_bytes),
        ("truncated frame then close", truncated_then_close),
        ("negative size", negative_size),
        ("huge size", huge_size),
        ("unknown api key", unknown_api_key),
        ("api key not implemented", unimplemented_api_key),
        ("unsupported version", unsupported_version),
        ("ApiVersions above max", api_versions_above_max),
        ("malformed body", malformed_body),
        ("array length bomb", array_length_bomb),
        ("acks=0 produce that fails", acks_zero_failure),
    ]


def test_bad_input_never_disturbs_other_connections(gateway: GatewayProcess) -> None:
    with WireClient(gateway.port) as admin:
        created = admin.request(
            make_request(
                19,
                5,
                topics=[
                    {
                        "name": "steady",
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                timeout=5000,
                validate_only=False,
            )
        )
        assert created.topics[0].error_code == 0

    with SteadyTraffic(gateway.bootstrap, "steady") as traffic:
        traffic.wait_flowing()
        for name, case in cases(gateway):
            try:
                case()
            except AssertionError as e:
                pytest.fail(f"{name}: {e}")
            time.sleep(0.15)
            assert gateway.alive(), f"gateway died after: {name}\n{gateway.log_tail()}"

    assert traffic.errors == []
    values = [v for _, v in traffic.received]
    assert values == list(range(traffic.sent)), "the consumer missed or repeated records"
    stamps = [t for t, _ in traffic.received]
    worst_gap = max(b - a for a, b in itertools.pairwise(stamps))
    assert worst_gap < 1.0, f"consumption stalled for {worst_gap:.2f}s"

    reasons = {e.get("reason") for e in gateway.events("request.rejected")}
    assert {
        "frame.negative_size",
        "frame.oversized",
        "api.unknown",
        "api.version_unsupported",
        "request.malformed",
        "produce.failed_with_acks_0",
    } <= reasons


def test_pipelined_requests_are_answered_in_order(gateway: GatewayProcess) -> None:
    from protocol.codec import encode_request

    requests = [
        make_request(18, 0),
        make_request(3, 1, topics=None),
        make_request(10, 1, key="g", key_type=0),
        make_request(18, 3, client_software_name="e2e", client_software_version="1"),
    ] * 25
    with WireClient(gateway.port) as c:
        c.send_raw(
            b"".join(encode_request(r, correlation_id=i, client_id="pipe") for i, r in enumerate(requests))
        )
        for i in range(len(requests)):
            answer = c.read_frame()
            assert answer is not None
            assert struct.unpack_from(">i", answer)[0] == i

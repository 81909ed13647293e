"""The classic Connect protocol codec (translation/connect_classic_protocol.py) against Kafka
Connect's own classes (connect-runtime 4.3.1: ConnectProtocol, IncrementalCooperativeConnectProtocol,
ExtendedAssignment, ExtendedWorkerState), through e2e/java_programs/ConnectProtocolOracle.java.

For a few hundred seeded random inputs (connector names of any Unicode, duplicates, empty lists,
every sub-protocol's version):

- what Kafka serializes is byte for byte what `build_assignment` / `encode_metadata` write for
  the same lists (so the HashSet order of assigned connectors is Kafka's), it decodes to the
  connectors and tasks given, and encodes back to the same bytes;
- what we encode, Kafka's deserializers read back as the same fields.
"""

from __future__ import annotations

import random
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from e2e.java_compile import Program
from harness.kafka_dist.connect import connect_dist
from harness.kafka_dist.java_clients import TOOL_JVM_OPTS
from translation.connect_classic_protocol import (
    ConnectAssignment,
    ConnectWorkerMetadata,
    build_assignment,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)

pytestmark = pytest.mark.e2e

SOURCE = Path(__file__).parent / "java_programs" / "ConnectProtocolOracle.java"
CASES = 300
ALPHABET = "abcxyz-_.09 ,;:\t\u00e9\u4e2d\U0001f600"


def _name(rng: random.Random) -> str:
    if rng.random() < 0.5:  # real-looking names, which collide in HashSet buckets
        return f"{rng.choice(['source', 'sink', 'mirror', 'files'])}-{rng.randrange(60)}"
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 9)))


def _h(s: str) -> str:
    return "x" + s.encode().hex()


def _names(xs: list[str]) -> str:
    return ";".join(_h(x) for x in xs)


def _tasks(ts: list[tuple[str, int]]) -> str:
    return ";".join(f"{_h(c)}:{t}" for c, t in ts)


@dataclass
class Case:
    kind: str  # "A0", "A", "W0", "W"
    version: int
    url: str
    leader: str
    leader_url: str
    offset: int
    error: int
    connectors: list[str]
    tasks: list[tuple[str, int]]
    revoked_connectors: list[str]
    revoked_tasks: list[tuple[str, int]]
    delay: int
    empty: bool  # W: ExtendedAssignment.empty() as the allocation

    def request(self) -> str:
        head = [self.error, _h(self.leader), _h(self.leader_url), self.offset]
        if self.kind == "A0":
            fields = ["A0", *head, _names(self.connectors), _tasks(self.tasks)]
        elif self.kind == "W0":
            fields = ["W0", _h(self.url), self.offset]
        else:
            rest = [*head, _names(self.connectors), _tasks(self.tasks)]
            rest += [_names(self.revoked_connectors), _tasks(self.revoked_tasks), self.delay]
            sessioned = "true" if self.version == 2 else "false"
            if self.kind == "A":
                fields = ["A", sessioned, *rest]
            else:
                fields = ["W", sessioned, _h(self.url), self.offset, *(["empty"] if self.empty else rest)]
        return "\t".join(str(f) for f in fields)

    def assignment(self) -> ConnectAssignment:
        return build_assignment(
            0 if self.kind == "A0" else self.version,
            self.leader,
            self.leader_url,
            self.offset,
            self.connectors,
            self.tasks,
            self.revoked_connectors,
            self.revoked_tasks,
            self.delay,
            self.error,
        )

    def ours(self) -> bytes:
        if self.kind in ("A0", "A"):
            return encode_assignment(self.assignment())
        if self.kind == "W0":
            return encode_metadata(ConnectWorkerMetadata(0, self.url, self.offset))
        allocation = None if self.empty else self.assignment()
        return encode_metadata(ConnectWorkerMetadata(self.version, self.url, self.offset, allocation))


def _case(rng: random.Random) -> Case:
    kind = rng.choice(["A0", "A", "A", "W0", "W", "W"])
    pool = [_name(rng) for _ in range(rng.randrange(1, 70 if rng.random() < 0.2 else 8))]
    connectors = [rng.choice(pool) for _ in range(rng.randrange(0, len(pool) + 2))]
    tasks = [(rng.choice(pool), rng.randrange(0, 9)) for _ in range(rng.randrange(0, 10))]
    revoked = [rng.choice(pool) for _ in range(rng.randrange(0, 4))]
    revoked_tasks = [(rng.choice(pool), rng.randrange(0, 9)) for _ in range(rng.randrange(0, 5))]
    return Case(
        kind,
        rng.choice([1, 2]),
        f"http://{_name(rng)}:{rng.randrange(65536)}/",
        _name(rng),
        f"http://{_name(rng)}:8083/",
        rng.choice([-1, 0, rng.randrange(2**40)]),
        rng.choice([0, 0, 1]),
        connectors,
        tasks,
        revoked,
        revoked_tasks,
        rng.choice([0, 0, rng.randrange(2**31)]),
        rng.random() < 0.3,
    )


def _run(program: Program, lines: list[str]) -> list[str]:
    proc = subprocess.run(
        ["java", *TOOL_JVM_OPTS, "-cp", program.classpath(), "ConnectProtocolOracle"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout.splitlines()
    assert len(out) == len(lines)
    return out


def _fields(a: ConnectAssignment) -> list[str]:
    return [
        str(a.error),
        _h(a.leader),
        _h(a.leader_url),
        str(a.config_offset),
        _names(list(a.connectors)),
        _tasks(list(a.tasks)),
    ]


def test_kafka_connect_writes_and_reads_what_our_codec_does(tmp_path: Path) -> None:
    dist = connect_dist()
    program = Program(SOURCE, dist.classpath, dist.home, tmp_path / "classes")
    rng = random.Random(32)
    cases = [_case(rng) for _ in range(CASES)]
    kafka = _run(program, [c.request() for c in cases])
    reads = []
    for case, answer in zip(cases, kafka, strict=True):
        ours = case.ours()
        assert answer == ours.hex(), f"{case}: Kafka wrote {answer}, we write {ours.hex()}"
        raw = bytes.fromhex(answer)
        if case.kind in ("A0", "A"):
            a = decode_assignment(raw)
            assert encode_assignment(a) == raw
            assert set(a.connectors) == set(case.connectors) and sorted(a.tasks) == sorted(case.tasks)
            if case.kind == "A":
                assert list(a.revoked_connectors) == list(dict.fromkeys(case.revoked_connectors))
                assert sorted(a.revoked_tasks) == sorted(case.revoked_tasks) and a.delay == case.delay
            reads.append(("R0" if case.kind == "A0" else "RA", raw))
        else:
            m = decode_metadata(raw)
            assert encode_metadata(m) == raw
            assert (m.url, m.config_offset, m.version) == (
                case.url,
                case.offset,
                0 if case.kind == "W0" else case.version,
            )
            if case.kind == "W" and not case.empty:
                assert set(m.connectors) == set(case.connectors) and sorted(m.tasks) == sorted(case.tasks)
            elif case.kind == "W":
                assert m.allocation is None
            if case.kind == "W":
                reads.append(("RW", raw))
    # Kafka's readers on our bytes: the same fields back.
    answers = _run(program, [f"{k}\t{raw.hex()}" for k, raw in reads])
    for (kind, raw), answer in zip(reads, answers, strict=True):
        got = answer.split("\t")
        if kind == "RW":
            m = decode_metadata(raw)
            assert got[:2] == [_h(m.url), str(m.config_offset)]
            if m.allocation is None:
                assert got[2:] == ["empty"]
            else:
                assert got[2:] == [str(m.version), *_alloc_fields(m.allocation)]
            continue
        a = decode_assignment(raw)
        if kind == "R0":
            assert got == _fields(a)
        else:
            assert got == [str(a.version), *_alloc_fields(a)]


def _alloc_fields(a: ConnectAssignment) -> list[str]:
    return [
        *_fields(a),
        _names(list(a.revoked_connectors)),
        _tasks(list(a.revoked_tasks)),
        str(a.delay),
    ]

"""What a fuzz target is, and the two engines that drive one.

A target is a function of one byte string that feeds it to one of our decoders exactly as the
server does, and a tuple of *clean* exceptions: the ones the server turns into a Kafka error
or a closed connection. The target's `check` swallows those; anything else escaping it (or a
broken invariant the target asserts) is a finding.

Engines:
* `atheris` (libFuzzer through Google's atheris, coverage-guided; the long runs): the target's
  modules are instrumented and its seed corpus is written to a directory libFuzzer reads.
* `random`: a seeded mutator over the seed corpus (bit flips, byte edits, interesting integers,
  truncation, splicing) with no coverage feedback. It needs nothing beyond the standard library,
  so the CI slice (`tests/test_fuzz_slice.py`) runs it; a seed reproduces a run exactly.
"""

from __future__ import annotations

import random
import struct
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Target:
    name: str
    doc: str
    seeds: Callable[[], list[bytes]]
    one_input: Callable[[bytes], Any]
    clean: tuple[type[BaseException], ...]
    instrument: Sequence[str] = ()  # modules atheris instruments for coverage
    outcomes: dict[str, int] = field(default_factory=dict)

    def check(self, data: bytes) -> None:
        """Run one input; record whether it decoded or was refused cleanly; raise on a finding."""
        try:
            self.one_input(data)
        except self.clean as e:
            key = type(e).__name__
        else:
            key = "ok"
        self.outcomes[key] = self.outcomes.get(key, 0) + 1


class Finding(Exception):
    """An input that escaped the target's clean exceptions."""

    def __init__(self, target: str, data: bytes, exc: BaseException) -> None:
        tb = "".join(traceback.format_exception(exc))
        super().__init__(f"{target}: {type(exc).__name__}: {exc}\ninput={data.hex()}\n{tb}")
        self.data = data
        self.exc = exc


_INTERESTING = (0, 1, -1, 0x7F, 0x80, 0xFF, 0x7FFF, -0x8000, 0xFFFF, 0x7FFFFFFF, -0x80000000, 0x10000)


def mutate(rng: random.Random, data: bytes, corpus: Sequence[bytes]) -> bytes:
    """One to four random edits of `data` (the libFuzzer mutations that matter for length fields)."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(8)
        n = len(buf)
        if op == 0 and n:
            i = rng.randrange(n)
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 1 and n:
            buf[rng.randrange(n)] = rng.randrange(256)
        elif op == 2:
            buf.insert(rng.randint(0, n), rng.randrange(256))
        elif op == 3 and n:
            i = rng.randrange(n)
            del buf[i : i + rng.randint(1, 8)]
        elif op == 4 and n >= 4:  # an interesting integer over a length-sized field
            width = rng.choice((1, 2, 4))
            i = rng.randrange(n - width + 1)
            v = rng.choice(_INTERESTING)
            buf[i : i + width] = (v & ((1 << (8 * width)) - 1)).to_bytes(width, "big")
        elif op == 5 and n:
            del buf[rng.randrange(n) :]
        elif op == 6 and corpus:  # splice with another seed
            other = rng.choice(corpus)
            i, j = rng.randint(0, n), rng.randint(0, len(other))
            buf = buf[:i] + other[j:]
        elif op == 7 and n:  # duplicate a slice (repeated array elements)
            i = rng.randrange(n)
            j = rng.randint(i, min(n, i + 16))
            buf[i:i] = buf[i:j]
    return bytes(buf)


@dataclass
class RunResult:
    target: str
    engine: str
    runs: int
    seconds: float
    findings: list[str]
    outcomes: dict[str, int]
    coverage: str | None = None

    @property
    def per_second(self) -> float:
        return self.runs / self.seconds if self.seconds else 0.0


def run_random(target: Target, runs: int, seed: int, stop_on_finding: bool = True) -> RunResult:
    """`runs` inputs: every seed once, then mutations of seeds (and of earlier mutants)."""
    rng = random.Random(seed)
    corpus = target.seeds()
    assert corpus, f"{target.name}: empty seed corpus"
    pool = list(corpus)
    findings: list[str] = []
    started = time.perf_counter()
    done = 0
    for i in range(runs):
        data = corpus[i] if i < len(corpus) else mutate(rng, rng.choice(pool), corpus)
        try:
            target.check(data)
        except Exception as e:
            findings.append(str(Finding(target.name, data, e)))
            if stop_on_finding:
                done = i + 1
                break
        if len(pool) < 4096 and rng.random() < 0.01:
            pool.append(data)  # keep some mutants so edits accumulate
        done = i + 1
    return RunResult(
        target.name, "random", done, time.perf_counter() - started, findings, dict(target.outcomes)
    )


def u16(v: int) -> bytes:
    return struct.pack(">H", v & 0xFFFF)

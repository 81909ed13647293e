"""`python -m fuzz TARGET --runs N [--engine atheris|random] [--seed S] [--json]`.

`atheris` (the default when installed: `pip install atheris`, extra `fuzz`) is coverage-guided
libFuzzer; its statistics (`cov:`, `ft:`, `exec/s`) go to stderr and the last line of stdout is
a JSON summary when `--json` is given. `random` is the dependency-free seeded mutator the CI
slice uses. Exit status 0: no finding; 1: a finding (printed with the input in hex, and with
atheris also written to `crash-*` in the working directory).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from typing import Any

import structlog

from fuzz import NAMES, target
from fuzz.common import Finding, RunResult, Target, run_random


def quiet_logs() -> None:
    """The decoders' callers log every refused input; at 10^5 inputs/s that is only noise."""
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
        logger_factory=structlog.ReturnLoggerFactory(),
    )


def run_atheris(t: Target, runs: int, seed: int, max_len: int) -> RunResult:
    import atheris

    for name in t.instrument:  # already imported by the target: instrument them in place
        _instrument_module(atheris, __import__(name, fromlist=["_"]))
    corpus = tempfile.mkdtemp(prefix=f"fuzz-{t.name}-")
    for i, s in enumerate(t.seeds()):
        with open(os.path.join(corpus, f"seed-{i:05d}"), "wb") as f:
            f.write(s)
    started = time.perf_counter()
    count = [0]

    def report() -> None:
        elapsed = time.perf_counter() - started
        print(
            json.dumps(
                {
                    "target": t.name,
                    "engine": "atheris",
                    "runs": count[0],
                    "seconds": round(elapsed, 1),
                    "per_second": round(count[0] / elapsed) if elapsed else 0,
                    "outcomes": t.outcomes,
                }
            ),
            flush=True,
        )

    def test_one(data: bytes) -> None:
        count[0] += 1
        try:
            t.check(data)
        except Exception as e:
            print(Finding(t.name, data, e), file=sys.stderr, flush=True)
            report()
            raise
        if count[0] == runs:
            report()  # libFuzzer ends the process without running Python's atexit hooks

    atheris.Setup(
        [
            sys.argv[0],
            f"-runs={runs}",
            f"-seed={seed}",
            f"-max_len={max_len}",
            "-print_final_stats=1",
            corpus,
        ],
        test_one,
    )
    atheris.Fuzz()  # exits the process
    raise AssertionError("unreachable")


def _instrument_module(atheris: Any, mod: Any) -> None:
    """Instrument every function of a module (and of a package's submodules) for coverage."""
    names = [mod.__name__]
    if hasattr(mod, "__path__"):
        names += [m for m in sys.modules if m.startswith(mod.__name__ + ".")]
    for n in names:
        m = sys.modules[n]
        for obj in list(vars(m).values()):
            if getattr(obj, "__module__", None) != n:
                continue
            if callable(obj) and hasattr(obj, "__code__"):
                atheris.instrument_func(obj)
            elif isinstance(obj, type):
                for v in vars(obj).values():
                    if hasattr(v, "__code__"):
                        atheris.instrument_func(v)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__.splitlines()[0])
    p.add_argument("target", choices=NAMES)
    p.add_argument("--runs", type=int, default=100_000)
    p.add_argument("--engine", choices=("atheris", "random"), default=None)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--max-len", type=int, default=4096)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    quiet_logs()
    t = target(a.target)
    engine = a.engine
    if engine is None:
        try:
            import atheris  # noqa: F401
        except ImportError:
            engine = "random"
        else:
            engine = "atheris"
    if engine == "atheris":
        run_atheris(t, a.runs, a.seed, a.max_len)
    r = run_random(t, a.runs, a.seed)
    if a.json:
        print(json.dumps({**r.__dict__, "per_second": round(r.per_second)}))
    else:
        print(
            f"{r.target}: {r.runs} inputs in {r.seconds:.1f} s ({r.per_second:.0f}/s), outcomes {r.outcomes}"
        )
        for f in r.findings:
            print(f)
    return 1 if r.findings else 0


if __name__ == "__main__":
    raise SystemExit(main())

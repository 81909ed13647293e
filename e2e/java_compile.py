"""Compiling the e2e tests' single-file Java programs (e2e/java_programs/) against a Kafka
distribution's jars: javac is started in the background so that it overlaps with what the test
starts meanwhile (a server, a cluster, the input), and waited for just before the classes are
needed."""

from __future__ import annotations

import subprocess
from pathlib import Path


def start_javac(classpath: str, source: Path, into: Path) -> subprocess.Popen[bytes]:
    """javac of `source` into `into` (created), running in the background."""
    into.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        ["javac", "-nowarn", "-cp", classpath, "-d", str(into), str(source)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def finish_javac(javac: subprocess.Popen[bytes], timeout: float = 180) -> None:
    """Wait for `javac`; a compile error fails the test with javac's output."""
    out, _ = javac.communicate(timeout=timeout)
    assert javac.returncode == 0, out.decode(errors="replace")

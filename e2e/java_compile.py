"""Compiling the e2e tests' single-file Java programs (e2e/java_programs/) against a Kafka
distribution's jars: javac is started in the background so that it overlaps with what the test
starts meanwhile (a server, a cluster, the input), and waited for just before the classes are
needed."""

from __future__ import annotations

import hashlib
import os
import shutil
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


class Program:
    """A Java program's classes, compiled once per source and jars and kept beside the cached
    jars (javac costs tens of seconds on a loaded machine), else compiled into `tmp` by a javac
    started at once and kept once it finished."""

    def __init__(self, source: Path, classpath: str, home: Path, tmp: Path) -> None:
        key = hashlib.sha256(source.read_bytes() + classpath.encode()).hexdigest()[:12]
        self.cached = home / f"classes-{source.stem}-{key}"
        self.jars = classpath
        self.tmp = tmp
        self.javac: subprocess.Popen[bytes] | None = None
        if not self.cached.is_dir():
            self.javac = start_javac(classpath, source, tmp)

    def classpath(self) -> str:
        """The classes' directory and the jars, once javac (if any) finished."""
        return f"{self.classes()}:{self.jars}"

    def classes(self) -> Path:
        """The compiled classes' (cached) directory, once javac (if any) finished."""
        if self.javac is not None:
            finish_javac(self.javac)
            self.javac = None
            staging = self.cached.with_name(f"{self.cached.name}.{os.getpid()}")
            shutil.copytree(self.tmp, staging, dirs_exist_ok=True)
            try:
                os.rename(staging, self.cached)
            except OSError:  # another run kept them first
                shutil.rmtree(staging, ignore_errors=True)
        return self.cached

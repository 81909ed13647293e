"""kfake, franz-go's fake Kafka cluster, as an upstream backend for the e2e tests.

kfake (`github.com/twmb/franz-go/pkg/kfake`) is an in-memory, Kafka-compatible broker written in
Go, from the Go module proxy like the Go verifiable consumers (harness/matrix/go_clients.py).
Started with `as_version="2.4"` it advertises only what Kafka 2.4 served: Metadata up to v9 (no
topic ids) and no ConsumerGroupHeartbeat, so it is a second backend, besides Kafka 2.4 itself,
on which KIP-848 clients work only through groupshift and only with groupshift's own topic ids
(gateway/upstream/topic_ids.py). Without `as_version` it serves topic ids and KIP-848.

`binary()` builds harness/kfake_go/main.go (a tiny main around `kfake.NewCluster`) once into
`~/.cache/groupshift/kfake/` (or `$GROUPSHIFT_KFAKE_CACHE`), named by a hash of the sources and
the Go toolchain, so an edit rebuilds and an unchanged tree never does; never committed. A cold
build downloads franz-go through the Go module proxy (about a minute here); warm, seconds.
`KfakeCluster` runs it on 127.0.0.1 and stops it by PID.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

HOST = "127.0.0.1"
SOURCES = Path(__file__).resolve().parent / "kfake_go"


class KfakeUnavailable(RuntimeError):
    """No Go toolchain (`tool_missing`), or the build or the start failed: the message says why."""

    def __init__(self, message: str, *, tool_missing: bool = False) -> None:
        super().__init__(message)
        self.tool_missing = tool_missing


def cache_dir() -> Path:
    base = os.environ.get("GROUPSHIFT_KFAKE_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "groupshift" / "kfake"


def _go() -> str:
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if go is None:
        raise KfakeUnavailable("no `go` on PATH (Go 1.26+ builds kfake)", tool_missing=True)
    return go


def _go_env() -> dict[str, str]:
    # GOTOOLCHAIN=local: never download a toolchain; static, like the Go verifiable consumers.
    return {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local"}


def binary() -> Path:
    """The built kfake main, building it on first use (an exclusive lock; renamed into place)."""
    go = _go()
    version = subprocess.run(
        [go, "env", "GOVERSION"], capture_output=True, text=True, timeout=60, check=False
    ).stdout.strip()
    h = hashlib.sha256(version.encode())
    for f in ("go.mod", "go.sum", "main.go"):
        h.update(f.encode() + b"\0" + (SOURCES / f).read_bytes() + b"\0")
    out_dir = cache_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"kfake-{h.hexdigest()[:16]}"
    if path.exists():
        return path
    with open(out_dir / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return path
        with tempfile.TemporaryDirectory(prefix="groupshift-kfake-") as scratch:
            partial = Path(scratch) / "kfake"
            proc = subprocess.run(
                [go, "build", "-trimpath", "-o", str(partial), "."],
                cwd=SOURCES,
                env=_go_env(),
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            if proc.returncode != 0:
                raise KfakeUnavailable(f"go build of kfake failed:\n{proc.stderr[-3000:]}")
            shutil.move(str(partial), str(path))
        for stale in out_dir.glob("kfake-*"):
            if stale != path:
                stale.unlink(missing_ok=True)
    return path


class KfakeCluster:
    """kfake's brokers on 127.0.0.1 (in memory: a restart starts empty), stopped by PID."""

    def __init__(
        self,
        workdir: Path,
        *,
        as_version: str | None = "2.4",
        brokers: int = 1,
        cluster_id: str = "kfake-e2e",
    ) -> None:
        self.workdir = workdir
        self.as_version = as_version
        self.size = brokers
        self.cluster_id = cluster_id
        self.addresses: list[str] = []
        self.process: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)

    @property
    def bootstrap(self) -> str:
        return ",".join(self.addresses)

    @property
    def log_path(self) -> Path:
        return self.workdir / "kfake.log"

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float = 60.0) -> KfakeCluster:
        """Start kfake and wait for the addresses it prints (one line per broker)."""
        if self.is_running():
            return self
        command = [
            str(binary()),
            "-brokers",
            str(self.size),
            "-cluster-id",
            self.cluster_id,
            "-partitions",
            "1",
        ]
        if self.as_version:
            command += ["-as-version", self.as_version]
        stdout = self.workdir / "kfake.addresses"
        with open(stdout, "wb") as out, open(self.log_path, "ab") as err:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while True:
            lines = [x for x in stdout.read_text().splitlines() if x.strip()]
            if len(lines) >= self.size:
                self.addresses = lines[: self.size]
                return self
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise KfakeUnavailable(f"kfake did not start:\n{self.log_tail()}")
            time.sleep(0.1)

    def api_versions(self) -> dict[int, tuple[int, int]]:
        from harness.kafka_dist.wire import api_versions

        host, _, port = self.addresses[0].rpartition(":")
        return api_versions(host, int(port))

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after `timeout` seconds."""
        if self.process is None:
            return
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(10)

"""Start `groupshift serve` as a real subprocess and talk to it.

`GatewayProcess.start(data_dir, sets=[...])` runs `python -m groupshift serve` on a free
127.0.0.1 port (`--listen 127.0.0.1:0`; the bound port is read from the `gateway.listening`
log event), with its JSON log written to a file so a chatty gateway can never block on a full
pipe. Tests reuse it for restarts on the same data directory and for group tests later
(`sets` are `--set NAME=VALUE` overrides, e.g. `group.consumer.heartbeat.interval.ms=500`).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT = 30.0


@dataclass
class GatewayProcess:
    proc: subprocess.Popen[bytes]
    data_dir: Path
    log_path: Path
    sets: tuple[str, ...]
    port: int = 0
    host: str = "127.0.0.1"
    metrics_url: str | None = None
    expected_exit: bool = False
    fd_limit: int | None = None
    start_timeout: float = START_TIMEOUT
    _log_file: Any = field(default=None, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def start(
        cls,
        data_dir: Path,
        *,
        sets: tuple[str, ...] | list[str] = (),
        log_path: Path | None = None,
        extra_args: tuple[str, ...] = (),
        fd_limit: int | None = None,
        start_timeout: float = START_TIMEOUT,
        cgroup: Path | None = None,
    ) -> GatewayProcess:
        """`fd_limit`: the server's `ulimit -n` (soft and hard RLIMIT_NOFILE), set in the child
        before it runs; `cgroup`: a cgroup directory the child joins before it runs (all its
        memory is charged there, e2e/memory_cgroup.py); `start_timeout`: how long to wait for
        `gateway.listening`."""
        data_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_path or data_dir.parent / f"{data_dir.name}-gateway.log"
        args = [
            sys.executable,
            "-m",
            "groupshift",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            str(data_dir),
            *extra_args,
        ]
        for s in sets:
            args += ["--set", s]
        log_file = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        start_offset = log_file.tell()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        limit = fd_limit

        def set_fd_limit() -> None:
            if limit is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
            if cgroup is not None:
                (cgroup / "cgroup.procs").write_text(str(os.getpid()))

        proc = subprocess.Popen(
            args,
            cwd=REPO,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=set_fd_limit if fd_limit is not None or cgroup is not None else None,
        )
        gw = cls(
            proc,
            data_dir,
            log_path,
            tuple(sets),
            fd_limit=fd_limit,
            start_timeout=start_timeout,
            _log_file=log_file,
        )
        gw._wait_listening(start_offset)
        return gw

    def _wait_listening(self, offset: int) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            for event in self.events(since=offset):
                if event.get("event") == "gateway.listening":
                    self.port = int(event["port"])
                    self.metrics_url = event.get("metrics")
                    return
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"gateway exited with {self.proc.returncode} before listening:\n" + self.log_tail()
                )
            time.sleep(0.05)
        self.proc.kill()
        raise RuntimeError(f"gateway did not log gateway.listening in {self.start_timeout}s")

    # -- logs ---------------------------------------------------------------------------------

    def events(self, name: str | None = None, since: int = 0) -> list[dict[str, Any]]:
        """Parsed JSON log lines (optionally only those whose `event` is `name`)."""
        out = []
        with open(self.log_path, "rb") as f:
            f.seek(since)
            for line in f:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and (name is None or event.get("event") == name):
                    out.append(event)
        return out

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_bytes().decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    def metrics(self) -> str:
        assert self.metrics_url is not None, "start with --set metrics.listen=127.0.0.1:0"
        with urllib.request.urlopen(self.metrics_url, timeout=5) as r:
            body: bytes = r.read()
            return body.decode()

    # -- lifecycle ----------------------------------------------------------------------------

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL (a crash): no shutdown path runs."""
        self.expected_exit = True
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._close_log()

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait: the graceful path; returns the exit code."""
        self.expected_exit = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                self._close_log()
                raise RuntimeError("gateway did not stop on SIGTERM") from None
        self._close_log()
        return int(self.proc.returncode)

    def restart(self) -> GatewayProcess:
        """A new process on the same data directory and settings (after kill/stop)."""
        assert not self.alive()
        return GatewayProcess.start(
            self.data_dir,
            sets=self.sets,
            log_path=self.log_path,
            fd_limit=self.fd_limit,
            start_timeout=self.start_timeout,
        )

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

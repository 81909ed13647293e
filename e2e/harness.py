"""Start `groupshift serve` as a real subprocess and talk to it.

`GatewayProcess.start(data_dir, sets=[...])` runs `python -m groupshift serve` on a free
127.0.0.1 port (`--listen 127.0.0.1:0`; the bound port is read from the `gateway.listening`
log event), with its JSON log written to a file so a chatty gateway can never block on a full
pipe. Tests reuse it for restarts on the same data directory and for group tests later
(`sets` are `--set NAME=VALUE` overrides, e.g. `group.consumer.heartbeat.interval.ms=500`).

`workers=N` (N > 1) runs `serve --workers N` instead (docs/workers.md): N worker processes under
a supervisor, worker i on the port + i, so the port is a free one with the next N - 1 free too
(the workers refuse port 0); `port` is worker 0's, the bootstrap address. The supervisor runs in
a session of its own, so that `kill` is a crash of the whole server (supervisor and workers, as
a SIGKILLed single process). The e2e fixtures take N from GROUPSHIFT_E2E_WORKERS (`e2e_workers`),
the opt-in switch that runs a suite (the migration suite, docs/workers.md) against N workers.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT = 30.0
WORKERS_ENV = "GROUPSHIFT_E2E_WORKERS"


def e2e_workers() -> int:
    """The worker count the e2e fixtures start servers with: GROUPSHIFT_E2E_WORKERS, 1 unset."""
    raw = os.environ.get(WORKERS_ENV, "").strip()
    if not raw:
        return 1
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{WORKERS_ENV} must be a positive integer, not {raw!r}")
    return int(raw)


def free_port_run(count: int, host: str = "127.0.0.1") -> int:
    """A port P with P .. P + count - 1 all free now (worker i of `--workers` listens on P + i)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if port + count > 65536:
            continue
        try:
            for i in range(1, count):
                with socket.socket() as other:
                    other.bind((host, port + i))
        except OSError:
            continue
        return port
    raise RuntimeError(f"no {count} consecutive free ports")


def fixed_listener_ports(sets: tuple[str, ...] | list[str], workers: int) -> tuple[str, ...]:
    """`sets` with each port 0 of a `listeners=` item replaced by a free port P (P .. P +
    workers - 1 free): the workers refuse port 0, since worker i listens on every port + i."""

    def fixed(entry: str) -> str:
        address, _, port = entry.strip().rpartition(":")
        return f"{address}:{free_port_run(workers)}" if port == "0" else entry

    out = []
    for item in sets:
        key, _, value = item.partition("=")
        if key.strip() == "listeners":
            item = f"{key}={','.join(fixed(e) for e in value.split(','))}"
        out.append(item)
    return tuple(out)


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
    workers: int = 1
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
        workers: int = 1,
    ) -> GatewayProcess:
        """`fd_limit`: the server's `ulimit -n` (soft and hard RLIMIT_NOFILE), set in the child
        before it runs; `cgroup`: a cgroup directory the child joins before it runs (all its
        memory is charged there, e2e/memory_cgroup.py); `start_timeout`: how long to wait for
        `gateway.listening`; `workers`: `serve --workers N` (a later `--listen` in `extra_args`
        names worker 0's port)."""
        data_dir.mkdir(parents=True, exist_ok=True)
        if workers > 1:
            sets = fixed_listener_ports(sets, workers)
        log_path = log_path or data_dir.parent / f"{data_dir.name}-gateway.log"
        args = [
            sys.executable,
            "-m",
            "groupshift",
            "serve",
            "--listen",
            f"127.0.0.1:{free_port_run(workers) if workers > 1 else 0}",
            "--data-dir",
            str(data_dir),
            *(("--workers", str(workers)) if workers > 1 else ()),
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
            start_new_session=workers > 1,
        )
        gw = cls(
            proc,
            data_dir,
            log_path,
            tuple(sets),
            fd_limit=fd_limit,
            start_timeout=start_timeout,
            workers=workers,
            _log_file=log_file,
        )
        gw._wait_listening(start_offset)
        return gw

    def _wait_listening(self, offset: int) -> None:
        """Until the server listens: its `gateway.listening` line; with workers, the
        supervisor's `workers.serving` (every worker listens), worker 0's line naming the port."""
        deadline = time.monotonic() + self.start_timeout * (self.workers if self.workers > 1 else 1)
        while time.monotonic() < deadline:
            events = self.events(since=offset)
            listening = [e for e in events if e.get("event") == "gateway.listening"]
            if self.workers > 1 and not any(e.get("event") == "workers.serving" for e in events):
                listening = []
            if listening:
                # Worker 0 starts first, alone: its line comes first.
                self.port = int(listening[0]["port"])
                self.metrics_url = listening[0].get("metrics")
                return
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"gateway exited with {self.proc.returncode} before listening:\n" + self.log_tail()
                )
            time.sleep(0.05)
        if self.workers > 1:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        else:
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
        """SIGKILL (a crash): no shutdown path runs. With workers, every process of the server's
        session (the supervisor and each worker) is killed."""
        self.expected_exit = True
        if self.workers > 1:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        else:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        if self.workers > 1:
            self._wait_session_gone()
        self._close_log()

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait: the graceful path; returns the exit code (with workers: the
        supervisor's, which passes SIGTERM on to every worker and waits for them)."""
        self.expected_exit = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                if self.workers > 1:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(self.proc.pid, signal.SIGKILL)
                else:
                    self.proc.kill()
                self.proc.wait(5)
                self._close_log()
                raise RuntimeError("gateway did not stop on SIGTERM") from None
        self._close_log()
        return int(self.proc.returncode)

    def _wait_session_gone(self, timeout: float = 10.0) -> None:
        """Until no process of the server's session is left (the workers die with the kill, but
        asynchronously: a restart on the same ports must not find them still bound)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        raise RuntimeError(f"processes of the server's session {self.proc.pid} outlived SIGKILL")

    def restart(self) -> GatewayProcess:
        """A new process on the same data directory and settings (after kill/stop)."""
        assert not self.alive()
        return GatewayProcess.start(
            self.data_dir,
            sets=self.sets,
            log_path=self.log_path,
            fd_limit=self.fd_limit,
            start_timeout=self.start_timeout,
            workers=self.workers,
        )

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

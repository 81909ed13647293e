"""A Docker engine for `groupshift matrix run --runtime docker`: an existing one, or one we start.

Order of preference:
1. `DOCKER_HOST` (any engine the user points us at: `unix:///path`, `tcp://host:port`), used as is;
2. the system engine at /var/run/docker.sock, when it answers;
3. our own `dockerd`, started here and stopped by `close()` (by the PID it was started with,
   nothing else) when no other groupshift process still uses it (a shared lock per user).
   When `dockerd` is missing and we are root, Debian's `docker.io` (which brings containerd, runc,
   tini and iptables) is installed with apt-get first. It runs with its own data root under
   `~/.cache/groupshift/docker` (images survive between runs, so built client images are reused),
   its own socket, pid file and log file there, and `--iptables=false --bridge=none`: matrix
   cells only use host networking, so the engine needs no NAT rules or bridge (which sandboxes
   often cannot create). The storage driver is the first of overlay2, fuse-overlayfs, vfs with
   which the daemon comes up; each failure's log tail is kept for the error message.

`EngineUnavailable` carries the reason an engine could not be had (not root, apt failed, every
storage driver failed with its error text) so tests skip saying exactly why.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SYSTEM_SOCKET = Path("/var/run/docker.sock")
STORAGE_DRIVERS = ("overlay2", "fuse-overlayfs", "vfs")
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


class EngineUnavailable(RuntimeError):
    """No Docker engine could be found or started; the message says why."""


def engine_home() -> Path:
    base = os.environ.get("GROUPSHIFT_DOCKER_HOME")
    return Path(base) if base else Path.home() / ".cache" / "groupshift" / "docker"


def exec_root() -> Path:
    return Path(f"/run/groupshift-docker-{os.getuid()}")


def docker_client(host: str, timeout: float = 120.0) -> Any:
    """A docker SDK client for `host` (the API version is negotiated with the engine)."""
    try:
        import docker
    except ImportError as e:  # the `docker` package comes with the test extras
        raise EngineUnavailable("the `docker` Python package is not installed (pip install docker)") from e
    return docker.DockerClient(base_url=host, version="auto", timeout=int(timeout))


def ping(host: str) -> str | None:
    """None when the engine at `host` answers, else why not."""
    try:
        client = docker_client(host, timeout=10)
    except EngineUnavailable as e:
        return str(e)
    except Exception as e:
        return f"{host}: {e}"
    try:
        client.ping()
        return None
    except Exception as e:
        return f"{host}: {e}"
    finally:
        client.close()


@dataclass
class Engine:
    """A Docker engine to talk to; `pid` is set only when we started its daemon ourselves."""

    host: str
    pid: int | None = None
    storage_driver: str | None = None
    log_path: Path | None = None
    how: str = ""
    _lock_file: Any = field(default=None, repr=False)

    def client(self, timeout: float = 300.0) -> Any:
        return docker_client(self.host, timeout)

    @property
    def started_here(self) -> bool:
        return self.pid is not None

    def close(self) -> None:
        """Leave the engine; the last groupshift user of a groupshift-started dockerd stops it.

        Every user of our own daemon holds a shared lock on `dockerd.users` for as long as it uses
        it; whoever can turn that into an exclusive lock on leaving is the last one and stops the
        daemon (SIGTERM, then SIGKILL of its process group) by the PID it was started with. An
        engine found through DOCKER_HOST or the system socket is never stopped.
        """
        users, self._lock_file = self._lock_file, None
        if users is None:
            return
        home = engine_home()
        with open(home / "dockerd.lock", "w") as start_lock:
            fcntl.flock(start_lock, fcntl.LOCK_EX)  # nobody attaches while we decide
            try:
                fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
                last = True
            except BlockingIOError:
                last = False
            pid = self.pid if self.pid is not None else _read_pid(home / "dockerd.pid")
            self.pid = None
            if last and pid is not None:
                _stop_pid(pid)
                with contextlib.suppress(OSError):
                    (home / "dockerd.pid").unlink()
                # dockerd leaves its default network namespace bind-mounted in its exec root
                netns = exec_root() / "netns" / "default"
                if os.path.ismount(netns):
                    subprocess.run(["umount", str(netns)], capture_output=True, timeout=30, check=False)
            users.close()


def _read_pid(path: Path) -> int | None:
    """The PID in a groupshift dockerd pid file, if that process is still a dockerd."""
    try:
        pid = int(path.read_text().strip())
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except (OSError, ValueError):
        return None
    return pid if comm == "dockerd" else None


def _stop_pid(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # not our child (started by an earlier runner): poll its /proc
            done = 0 if Path(f"/proc/{pid}").exists() else pid
        if done:
            return
        time.sleep(0.1)
    # dockerd did not stop in time: its session (containerd and the shims it started) goes with it.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def find_engine() -> Engine | None:
    """An engine that already runs (DOCKER_HOST, then the system socket), or None."""
    if host := os.environ.get("DOCKER_HOST"):
        why = ping(host)
        if why is not None:
            raise EngineUnavailable(f"DOCKER_HOST={host} does not answer: {why}")
        return Engine(host, how=f"DOCKER_HOST={host}")
    if SYSTEM_SOCKET.exists() and ping(f"unix://{SYSTEM_SOCKET}") is None:
        return Engine(f"unix://{SYSTEM_SOCKET}", how=f"the system engine at {SYSTEM_SOCKET}")
    return None


def ensure_engine(*, install: bool = True) -> Engine:
    """An engine to use: an existing one, else our own dockerd (installed first if need be)."""
    found = find_engine()
    if found is not None:
        return found
    home = engine_home()
    home.mkdir(parents=True, exist_ok=True)
    socket = home / "docker.sock"
    host = f"unix://{socket}"
    users = open(home / "dockerd.users", "w")  # noqa: SIM115 - kept by the Engine until close()
    with open(home / "dockerd.lock", "w") as start_lock:
        fcntl.flock(start_lock, fcntl.LOCK_EX)
        fcntl.flock(users, fcntl.LOCK_SH)
        try:
            if socket.exists() and ping(host) is None:
                # started by another groupshift runner that still uses it, or one that died
                engine = Engine(host, how=f"the groupshift dockerd already running at {socket}")
            else:
                _ensure_installed(install)
                engine = _start_dockerd(home, socket)
        except BaseException:
            users.close()
            raise
    engine._lock_file = users
    return engine


def _ensure_installed(install: bool) -> None:
    if shutil.which("dockerd") and shutil.which("containerd"):
        return
    if not install:
        raise EngineUnavailable("no Docker engine runs and dockerd is not installed (install not allowed)")
    if os.geteuid() != 0:
        raise EngineUnavailable(
            "no Docker engine runs (DOCKER_HOST unset, /var/run/docker.sock absent) and dockerd is not "
            "installed; installing Debian's docker.io needs root"
        )
    if shutil.which("apt-get") is None:
        raise EngineUnavailable("no Docker engine runs and there is no apt-get to install docker.io with")
    packages = ["docker.io", "containerd", "runc", "tini", "iptables"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install_cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    proc = subprocess.run(install_cmd, capture_output=True, text=True, env=env, timeout=900, check=False)
    if proc.returncode != 0:  # package lists may be missing or old
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env, timeout=600, check=False)
        proc = subprocess.run(install_cmd, capture_output=True, text=True, env=env, timeout=900, check=False)
    if proc.returncode != 0 or shutil.which("dockerd") is None:
        raise EngineUnavailable(f"apt-get install {' '.join(packages)} failed:\n{proc.stderr[-2000:]}")


def _start_dockerd(home: Path, socket: Path) -> Engine:
    """Start dockerd with the first storage driver that works; EngineUnavailable lists each failure."""
    failures: list[str] = []
    for driver in STORAGE_DRIVERS:
        if driver == "fuse-overlayfs" and shutil.which("fuse-overlayfs") is None:
            failures.append("fuse-overlayfs: not installed")
            continue
        log_path = home / "dockerd.log"
        pid_path = home / "dockerd.pid"
        with contextlib.suppress(OSError):
            socket.unlink()
        command = [
            "dockerd",
            f"--data-root={home / 'root'}",
            # the exec root holds containerd's socket: a short path keeps it under the 108-byte limit
            f"--exec-root={exec_root()}",
            f"--pidfile={pid_path}",
            f"--host=unix://{socket}",
            f"--storage-driver={driver}",
            "--iptables=false",
            "--ip-masq=false",
            "--bridge=none",
        ]
        with open(log_path, "ab") as log:
            offset = log.tell()
            proc = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        why = _wait_ready(proc, f"unix://{socket}")
        if why is None:
            return Engine(
                f"unix://{socket}",
                pid=proc.pid,
                storage_driver=driver,
                log_path=log_path,
                how=f"dockerd (pid {proc.pid}, storage driver {driver}) started by groupshift",
            )
        _stop_pid(proc.pid)
        tail = _log_tail(log_path, offset)
        failures.append(f"{driver}: {why}\n{tail}")
    raise EngineUnavailable("dockerd could not start here:\n" + "\n".join(failures))


def _wait_ready(proc: subprocess.Popen[bytes], host: str) -> str | None:
    deadline = time.monotonic() + START_TIMEOUT
    why = "did not answer"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return f"dockerd exited with status {proc.returncode}"
        why = ping(host) or ""
        if not why:
            return None
        time.sleep(0.25)
    return f"dockerd did not answer within {START_TIMEOUT:.0f}s ({why})"


def _log_tail(path: Path, offset: int, lines: int = 8) -> str:
    with open(path, "rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    interesting = [
        ln for ln in text.splitlines() if "level=error" in ln or "level=fatal" in ln or "failed" in ln
    ]
    return "\n".join((interesting or text.splitlines())[-lines:])

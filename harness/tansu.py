"""Tansu (https://tansu.io), a non-Apache Kafka-compatible broker, as an upstream backend for the
e2e tests of `serve --upstream`.

Tansu is a Rust program published on crates.io (crate `tansu`; PyPI's package of that name is an
unrelated project), so it is built with cargo once and cached:

    cargo install tansu --version 0.6.0 --locked --features dynostore \\
        --root ~/.cache/groupshift/tansu   (CARGO_TARGET_DIR ~/.cache/groupshift/tansu-target)

The `dynostore` feature matters: with the crate's default features the only storage engine
compiled in is `null://` (produce answers offset 6 and keeps nothing, fetch returns nothing),
and the default `memory://` engine fails with "feature not enabled". `dynostore` adds the
in-memory object store (`memory://`) that these tests use; its objects live in the broker's
process, so a restarted Tansu starts empty.

A cold build is about 15 CPU-minutes (395 crates; it took 60 minutes of wall time at nice 19
on this project's shared two-core machine under a load average of 15-50), and adding
`dynostore` to a cached default build about 4.5 CPU-minutes (10 minutes of wall time at nice
5 under load 15). So `.ci/run` starts `python3 -m harness.tansu build` in the background first
thing and the pytest fixture waits for it (and Tansu's tests run last in the session):
builds are serialised by a file lock (`tansu-build.lock` in the cache); whoever holds it
builds, anyone else waits (bounded, printing the build log's progress) and then finds the
binary. This module uses the standard library only, so the background build can start
before the project's virtualenv exists.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

TANSU_VERSION = "0.6.0"
TANSU_FEATURES = ("dynostore",)
HOST = "127.0.0.1"
#: How long the fixture waits for another process's build (a cold build is about 15 CPU-minutes).
DEFAULT_BUILD_WAIT = 45 * 60.0


def cache_dir() -> Path:
    return Path(os.environ.get("GROUPSHIFT_CACHE", Path.home() / ".cache" / "groupshift"))


def install_root() -> Path:
    return cache_dir() / "tansu"


def target_dir() -> Path:
    return cache_dir() / "tansu-target"


def build_log() -> Path:
    return cache_dir() / "tansu-build.log"


def binary_path() -> Path:
    return install_root() / "bin" / "tansu"


class TansuUnavailable(RuntimeError):
    """Tansu cannot be built or started; `tool_missing` when cargo itself is absent."""

    def __init__(self, message: str, *, tool_missing: bool = False) -> None:
        super().__init__(message)
        self.tool_missing = tool_missing


def find_cargo() -> str | None:
    found = shutil.which("cargo")
    if found:
        return found
    rustup_default = Path.home() / ".cargo" / "bin" / "cargo"
    return str(rustup_default) if rustup_default.exists() else None


def installed() -> bool:
    """The cached binary exists and cargo recorded it as this version with our features."""
    if not binary_path().exists():
        return False
    try:
        record = json.loads((install_root() / ".crates2.json").read_text())
    except (OSError, ValueError):
        return False
    for key, info in record.get("installs", {}).items():
        if key.startswith(f"tansu {TANSU_VERSION} ") and set(TANSU_FEATURES) <= set(info.get("features", [])):
            return True
    return False


BUILD_COMMAND = "python -m harness.tansu build"


def in_ci(env: Mapping[str, str] | None = None) -> bool:
    """`CI` set to anything but empty/0/false, as CI services and `.ci/run` set it."""
    value = (os.environ if env is None else env).get("CI", "")
    return value.strip().lower() not in ("", "0", "false", "no")


def build_in_progress() -> bool:
    """Another process holds the build lock (`.ci/run`'s background build, or a developer's
    `python -m harness.tansu build`)."""
    lock_path = cache_dir() / "tansu-build.lock"
    if not lock_path.exists():
        return False
    with open(lock_path, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(lock, fcntl.LOCK_UN)
    return False


def opt_in_skip_reason(env: Mapping[str, str] | None = None) -> str | None:
    """Why a Tansu test is skipped here, or None when it runs (with the binary or its build).

    A cold build is about 15 CPU-minutes of Rust: too long to start inside a test fixture for
    someone running the README's test command for the first time. So outside CI the Tansu
    tests run only once the binary is cached (or while a build started by hand is running, which
    the fixture then waits for); the reason printed names the command that builds it. In CI
    (`CI=true`, as `.ci/run` runs) they always run: `.ci/run` builds Tansu in the background."""
    if in_ci(env) or installed() or build_in_progress():
        return None
    return (
        f"Tansu {TANSU_VERSION} is not built (a cold build is about 15 CPU-minutes of Rust, so it is "
        f"opt-in outside CI): run `{BUILD_COMMAND}` once (cached in {install_root()}), then run the "
        "tests again; CI (CI=true) builds it in the background and runs these tests"
    )


def _log_progress(log: Path) -> str:
    """The build log's last line and how many crates it compiled so far."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no build log yet)"
    compiled = sum(1 for line in lines if line.lstrip().startswith("Compiling"))
    last = lines[-1].strip() if lines else ""
    return f"{compiled} crates compiled; last: {last}"


def build(
    *,
    wait: float = DEFAULT_BUILD_WAIT,
    progress: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
    progress_every: float = 30.0,
) -> Path:
    """The Tansu binary, built first if missing (or waited for while another process builds).

    Raises `TansuUnavailable` when cargo is absent, the build fails, or another build does not
    finish within `wait` seconds.
    """
    if installed():
        return binary_path()
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / "tansu-build.lock", "a+") as lock:
        start = time.monotonic()
        announced = False
        next_report = 0.0
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = time.monotonic() - start
                if waited > wait:
                    raise TansuUnavailable(
                        f"another Tansu build did not finish within {wait:.0f}s "
                        f"({_log_progress(build_log())}; log {build_log()})"
                    ) from None
                if not announced or waited >= next_report:
                    progress(
                        f"waiting for the Tansu build running in another process ({waited:.0f}s): "
                        f"{_log_progress(build_log())}"
                    )
                    announced = True
                    next_report = waited + progress_every
                time.sleep(2.0)
        try:
            if installed():  # built by the process we waited for
                return binary_path()
            return _cargo_install(progress)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _cargo_install(progress: Callable[[str], None]) -> Path:
    cargo = find_cargo()
    if cargo is None:
        raise TansuUnavailable(
            "cargo is not installed: Tansu is built from crates.io with cargo "
            "(install Rust with rustup, https://rustup.rs; Debian's rustc is too old for it)",
            tool_missing=True,
        )
    niceness = os.environ.get("GROUPSHIFT_TANSU_NICE", "19")
    command = [
        "nice", "-n", niceness, cargo, "install", "tansu", "--version", TANSU_VERSION, "--locked",
        "--features", ",".join(TANSU_FEATURES), "--root", str(install_root()),
    ]  # fmt: skip
    env = {**os.environ, "CARGO_TARGET_DIR": str(target_dir())}
    progress(f"building Tansu {TANSU_VERSION} with cargo (log {build_log()})")
    started = time.monotonic()
    with open(build_log(), "a") as out:
        out.write(f"--- groupshift: {' '.join(command)} at {time.ctime()}\n")
        out.flush()
        code = subprocess.call(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
        took = time.monotonic() - started
        out.write(f"--- groupshift: cargo exited {code} after {took:.0f}s\n")
    if code != 0 or not installed():
        raise TansuUnavailable(f"cargo install tansu failed (exit {code}); see {build_log()}")
    progress(f"built Tansu in {took:.0f}s")
    return binary_path()


def free_port() -> int:
    """A port free now and never handed out twice by this process (harness.kafka_dist's)."""
    from harness.kafka_dist.cluster import free_port as distinct_free_port

    return distinct_free_port()


class TansuBroker:
    """One Tansu broker on 127.0.0.1 with in-memory storage, stopped by PID.

    Tansu runs as a single node here: its brokers share state only through a shared storage
    engine (S3 or PostgreSQL), none of which the tests have.
    """

    def __init__(self, workdir: Path, *, binary: Path | None = None, port: int | None = None) -> None:
        self.workdir = workdir
        self.binary = binary or binary_path()
        self.port = port or free_port()
        self.cluster_id = "groupshift-e2e"
        self.process: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "tansu.log"

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float = 60.0) -> TansuBroker:
        if self.is_running():
            return self
        url = f"tcp://{HOST}:{self.port}"
        command = [
            str(self.binary), "broker",
            "--cluster-id", self.cluster_id,
            "--listener-url", url,
            "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/",
        ]  # fmt: skip
        with open(self.log_path, "ab") as out:
            out.write(f"\n--- groupshift: starting Tansu at {time.ctime()}: {' '.join(command)}\n".encode())
            out.flush()
            self.process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "RUST_LOG": os.environ.get("GROUPSHIFT_TANSU_LOG", "warn")},
            )
        self.wait_ready(timeout)
        return self

    def answers(self) -> bool:
        from harness.kafka_dist.wire import api_versions

        try:
            api_versions(HOST, self.port, timeout=2.0)
        except (OSError, ConnectionError, KeyError, ValueError):
            return False
        return True

    def api_versions(self) -> dict[int, tuple[int, int]]:
        from harness.kafka_dist.wire import api_versions

        return api_versions(HOST, self.port)

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise TansuUnavailable(
                    f"Tansu exited with {self.process.returncode} while starting:\n{self.log_tail()}"
                )
            if self.answers():
                return
            time.sleep(0.2)
        raise TansuUnavailable(f"Tansu did not answer ApiVersions within {timeout:.0f}s:\n{self.log_tail()}")

    def _signal(self, sig: signal.Signals) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, sig)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after `timeout` seconds."""
        if self.process is None:
            return
        self._signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self.process.wait(10)

    def kill(self) -> None:
        if self.process is None:
            return
        self._signal(signal.SIGKILL)
        self.process.wait(10)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.tansu", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build (or wait for) the cached Tansu binary")
    b.add_argument("--wait", type=float, default=DEFAULT_BUILD_WAIT, help="seconds to wait for another build")
    sub.add_parser("path", help="print the binary's path if it is built (exit 1 if not)")
    args = parser.parse_args(argv)
    if args.command == "path":
        if installed():
            print(binary_path())
            return 0
        print(f"Tansu {TANSU_VERSION} is not built yet ({binary_path()})", file=sys.stderr)
        return 1
    try:
        print(build(wait=args.wait))
    except TansuUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 2 if e.tool_missing else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The README path, end to end: every step a new user takes, as README.md says it.

Issue "Tools that never lie and never destroy": a fresh virtualenv from README command 1, the
README's Python example run twice, a classic -> consumer migration watched with
`groupshift groups migration --watch`, `groupshift check upgrade` and `groupshift groups
describe`, all with the binaries of that fresh virtualenv. The README's text is read from
README.md (its first ```sh block and first ```python block), so the test fails when the README
changes into something that no longer works.

Two deliberate differences from README command 1: the server listens on a free port
(`--listen 127.0.0.1:0`, the address read back from its "listening on HOST:PORT" line) instead of
the default 127.0.0.1:9092, and its data directory is a temporary one instead of
./groupshift-data, so the test never collides with a server or data a developer has running.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
INSTALL_TIMEOUT = 600.0
# `--watch` polls once a second, for 40 s at most (the test stops it once it saw the conversion).
WATCH_POLLS = ["--count", "40", "--interval", "1"]
# The header line of the README's `groups describe` example (Kafka's column names).
DESCRIBE_HEADERS = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
DESCRIBE_HEADERS += ["CONSUMER-ID", "HOST", "CLIENT-ID"]

# A classic member (kafka-python is not in a fresh `pip install -e .`: confluent-kafka with
# group.protocol=classic is) that polls until its stop file appears, then closes cleanly.
CLASSIC_MEMBER = """
import pathlib, sys
from confluent_kafka import Consumer
bootstrap, group, topic, stop = sys.argv[1:5]
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "classic",
              "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
              "heartbeat.interval.ms": 1000})
c.subscribe([topic])
print("classic member polling", flush=True)
while not pathlib.Path(stop).exists():
    c.poll(0.5)
c.close()
"""

CONSUMER_MEMBER = (
    CLASSIC_MEMBER.replace('"classic"', '"consumer"')
    .replace('"session.timeout.ms": 10000,\n              "heartbeat.interval.ms": 1000', "")
    .replace("classic member polling", "consumer member polling")
)


def _blocks(lang: str) -> list[str]:
    """The README's fenced blocks of one language, in order."""
    return re.findall(rf"^```{lang}\n(.*?)^```", README.read_text(), flags=re.M | re.S)


def _step(times: dict[str, float], name: str, start: float) -> None:
    times[name] = time.monotonic() - start
    print(f"[readme-path] {name}: {times[name]:.1f}s", flush=True)


def _stop(proc: subprocess.Popen[bytes], timeout: float = 15.0, sig: int = signal.SIGTERM) -> None:
    """Signal the process we started (by its PID; SIGTERM unless told), SIGKILL if it does not go."""
    if proc.poll() is not None:
        return
    os.kill(proc.pid, sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """README command 1's install part in a fresh virtualenv: `python3 -m venv .venv &&
    .venv/bin/pip install -e .`, with `.` being this checkout (pip's own cache makes it fast)."""
    first = _blocks("sh")[0].strip()
    assert first == ("python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/groupshift serve"), (
        f"README command 1 changed shape, update this test: {first!r}"
    )
    root = tmp_path_factory.mktemp("readme") / ".venv"
    print(
        f"\n[readme-path] creating a virtualenv and running pip install -e {REPO} "
        f"(README command 1; up to {INSTALL_TIMEOUT:.0f}s)",
        flush=True,
    )
    start = time.monotonic()
    subprocess.run(["python3", "-m", "venv", str(root)], check=True, timeout=120)
    install = subprocess.run(
        [str(root / "bin" / "pip"), "install", "-q", "-e", str(REPO)],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    print(f"[readme-path] venv + pip install: {time.monotonic() - start:.1f}s", flush=True)
    return root


@pytest.fixture(scope="module")
def server(venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`groupshift serve` from the fresh virtualenv; yields its HOST:PORT."""
    base = tmp_path_factory.mktemp("serve")
    log_path = base / "serve.log"
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                str(venv / "bin" / "groupshift"),
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                str(base / "groupshift-data"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=base,
        )
    try:
        address = None
        deadline = time.monotonic() + 60
        while address is None and time.monotonic() < deadline:
            m = re.search(r"listening on (127\.0\.0\.1:\d+)", log_path.read_text(errors="replace"))
            if m:
                address = m.group(1)
                break
            assert proc.poll() is None, f"serve exited {proc.returncode}:\n{log_path.read_text()}"
            time.sleep(0.1)
        assert address, f"no 'listening on' line in 60s:\n{log_path.read_text()}"
        print(f"[readme-path] serve listening on {address}: {time.monotonic() - start:.1f}s")
        yield address
        assert proc.poll() is None, f"serve died:\n{log_path.read_text()[-4000:]}"
    finally:
        _stop(proc, sig=signal.SIGINT)  # README: "Ctrl-C stops it cleanly"
    assert proc.returncode == 0, f"serve exited {proc.returncode} on Ctrl-C (SIGINT)"


def test_readme_path(venv: Path, server: str, tmp_path: Path) -> None:
    """The README's steps in the README's order; each step's wall time is printed (-s)."""
    times: dict[str, float] = {}
    py = str(venv / "bin" / "python")
    gs = str(venv / "bin" / "groupshift")

    # The README's Python example, twice: a user runs it again and it must still work.
    example = _blocks("python")[0].replace("127.0.0.1:9092", server)
    assert example.count(server) == 3, "the README example's bootstrap address changed"
    for run in (1, 2):
        start = time.monotonic()
        out = subprocess.run([py, "-c", example], capture_output=True, text=True, timeout=120)
        _step(times, f"README example run {run}", start)
        assert out.returncode == 0, f"run {run}: {out.stdout}{out.stderr}"
        assert out.stdout.strip() == "b'hello'", f"run {run}: {out.stdout!r}"

    # A migration watched: a classic member, the watch, then a consumer-protocol member.
    group, topic = "readme-migration", "orders"
    stop = tmp_path / "stop"
    procs: list[subprocess.Popen[bytes]] = []
    with (
        open(tmp_path / "classic.log", "wb") as classic_log,
        open(tmp_path / "consumer.log", "wb") as consumer_log,
    ):
        try:
            start = time.monotonic()
            classic = subprocess.Popen(
                [py, "-c", CLASSIC_MEMBER, server, group, topic, str(stop)],
                stdout=subprocess.DEVNULL,
                stderr=classic_log,
            )
            procs.append(classic)
            _wait_for(gs, server, group, "classic 1", deadline_s=60)
            _step(times, "classic member joined", start)

            start = time.monotonic()
            watch_log = tmp_path / "watch.log"
            with open(watch_log, "wb") as wl:
                watch = subprocess.Popen(
                    [gs, "groups", "--bootstrap-server", server, "migration", group, "--watch", *WATCH_POLLS],
                    stdout=wl,
                    stderr=subprocess.STDOUT,
                )
            procs.append(watch)
            _wait_in_file(watch_log, f"Group {group}: type classic", watch)  # the "before" view
            consumer = subprocess.Popen(
                [py, "-c", CONSUMER_MEMBER, server, group, topic, str(stop)],
                stdout=subprocess.DEVNULL,
                stderr=consumer_log,
            )
            procs.append(consumer)
            deadline = time.monotonic() + 60
            text = ""
            while time.monotonic() < deadline:
                text = watch_log.read_text(errors="replace")
                if "type consumer" in text and "classic 1, consumer 1" in text:
                    break
                assert watch.poll() is None, f"watch exited {watch.returncode}:\n{text}"
                time.sleep(0.5)
            _step(times, "migration watched (classic -> consumer)", start)
            assert f"Group {group}: type classic" in text, text
            assert "type consumer" in text and "phase migrating" in text, text
            assert "Members by protocol: classic 1, consumer 1" in text, text
            _stop(watch)

            # `check upgrade`: a consumer group is READY ("already a consumer group"), exit 0.
            start = time.monotonic()
            check = subprocess.run(
                [gs, "check", "upgrade", "--bootstrap-server", server, group],
                capture_output=True,
                text=True,
                timeout=60,
            )
            _step(times, "check upgrade", start)
            assert check.returncode == 0, check.stdout + check.stderr
            assert f"{group}: READY" in check.stdout, check.stdout
            assert "already a consumer group" in check.stdout, check.stdout

            # `groups describe`: Kafka's kafka-consumer-groups.sh columns.
            start = time.monotonic()
            describe = subprocess.run(
                [gs, "groups", "--bootstrap-server", server, "describe", group],
                capture_output=True,
                text=True,
                timeout=60,
            )
            _step(times, "groups describe", start)
            assert describe.returncode == 0, describe.stdout + describe.stderr
            # Like kafka-consumer-groups.sh, the table follows one blank line.
            header = describe.stdout.strip().splitlines()[0]
            assert header.split() == list(DESCRIBE_HEADERS), describe.stdout
            assert f"{group} {topic}" in " ".join(describe.stdout.split()), describe.stdout
        finally:
            stop.touch()
            for p in procs:
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    _stop(p)
    for p in (classic, consumer):
        assert p.returncode == 0, (tmp_path / "classic.log").read_text() + (
            tmp_path / "consumer.log"
        ).read_text()
    print(f"[readme-path] step times: {times}", file=sys.stderr)


def _wait_for(gs: str, server: str, group: str, needle: str, deadline_s: float) -> None:
    """Poll the one-shot migration view until it shows `needle` (e.g. the classic member)."""
    deadline = time.monotonic() + deadline_s
    out = ""
    while time.monotonic() < deadline:
        out = subprocess.run(
            [gs, "groups", "--bootstrap-server", server, "migration", group],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
        if needle in out:
            return
        time.sleep(0.5)
    raise AssertionError(f"{needle!r} not in the migration view after {deadline_s}s:\n{out}")


def _wait_in_file(path: Path, needle: str, proc: subprocess.Popen[bytes]) -> None:
    """Wait (60 s at most) until the running `proc` has written `needle` to `path`."""
    deadline = time.monotonic() + 60
    text = ""
    while time.monotonic() < deadline:
        text = path.read_text(errors="replace")
        if needle in text:
            return
        assert proc.poll() is None, f"exited {proc.returncode}:\n{text}"
        time.sleep(0.2)
    raise AssertionError(f"{needle!r} not written in 60s:\n{text}")

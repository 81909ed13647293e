"""Pytest fixtures of the fleet job's tests (registered in the root conftest.py):

* `spark`: ONE local-mode SparkSession (`local[2]`) for the whole test session; starting a JVM
  costs ~10 s, and a process can hold one SparkContext only;
* `small_fleet`: a synthetic fleet written by the real engine (`groupshift fleet synth`), shared;
* `spark_standalone`: a real Spark standalone cluster, one master and two workers started from
  the pyspark installation (`spark-class org.apache.spark.deploy.master.Master` / `...Worker`),
  bound to 127.0.0.1 and stopped by PID; yields the master URL.

Tests that need Java skip with the reason when it is absent (tests/test_fleet.py has siblings
that run the plain-Python reference without it).

Every Spark JVM of a test session runs with `SPARK_TEST_JVM_OPTS` (C1 only, the serial GC), as
the harness's Kafka JVMs do (harness/kafka_dist/cluster.py): the fleet jobs here are seconds of
small data, where the C2 compiler's and the parallel collector's threads compete for the two
cores and give nothing back. `SPARK_SUBMIT_OPTS` carries them to each driver (this process's
`spark` session and each `groupshift fleet` subprocess, local mode included: its executors run in
the driver) and, as `spark.executor.extraJavaOptions` (a `spark.*` system property of the driver
is a setting of its SparkConf), to a standalone cluster's executors; `SPARK_DAEMON_JAVA_OPTS` to
the standalone master and workers. Measured: a
`groupshift fleet report` of a small synth dir, 58 s -> 37 s on a loaded 2-core machine.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SPARK_TEST_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def pytest_configure(config: pytest.Config) -> None:
    """Before any Spark JVM starts: the drivers' options (an operator's own setting is kept)."""
    executors = f"'-Dspark.executor.extraJavaOptions={SPARK_TEST_JVM_OPTS}'"  # a standalone's
    os.environ.setdefault("SPARK_SUBMIT_OPTS", f"{SPARK_TEST_JVM_OPTS} {executors}")


def java_missing() -> str | None:
    if shutil.which("java") is None:
        return "no java on PATH (Spark needs Java 17+)"
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (pip install 'groupshift[fleet]')"
    return None


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    reason = java_missing()
    if reason:
        pytest.skip(reason)
    from tools.fleet.job import session

    s = session("local[2]", app="groupshift-fleet-tests")
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def small_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three clusters of 14 groups, ~6,000 records over three simulated hours."""
    from tools.fleet.synth import synth

    out = tmp_path_factory.mktemp("fleet")
    synth(str(out), clusters=3, groups=14, records=6000, hours=3.0, seed=7)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def _wait_port(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"exited {proc.returncode}: {log.read_text()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"port {port} not open after {timeout}s: {log.read_text()[-3000:]}")


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    reason = java_missing()
    if reason:
        pytest.skip(reason)
    home = _spark_home()
    work = tmp_path_factory.mktemp("spark-standalone")
    env = {
        **os.environ,
        "SPARK_HOME": home,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(work / "local"),
        "SPARK_WORKER_DIR": str(work / "work"),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_DAEMON_JAVA_OPTS": os.environ.get("SPARK_DAEMON_JAVA_OPTS", SPARK_TEST_JVM_OPTS),
    }
    spark_class = os.path.join(home, "bin", "spark-class")
    port, ui = _free_port(), _free_port()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        log = work / "master.log"
        master = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(ui)],
            env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        procs.append(master)
        _wait_port(port, master, log, 90)
        url = f"spark://127.0.0.1:{port}"
        worker_ports = []
        for i in range(2):
            wlog = work / f"worker-{i}.log"
            wport = _free_port()
            worker_ports.append(wport)
            w = subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                 "--port", str(wport), "--webui-port", str(_free_port()), "--cores", "1",
                 "--memory", "1g", "--work-dir", str(work / f"work-{i}"), url],
                env=env, stdout=wlog.open("wb"), stderr=subprocess.STDOUT,
            )  # fmt: skip
            procs.append(w)
        for i, w in enumerate(procs[1:]):
            _wait_port(worker_ports[i], w, work / f"worker-{i}.log", 90)
        _wait_registered(work / "master.log", 2, 60)
        yield url
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _wait_registered(log: Path, workers: int, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if log.read_text(errors="replace").count("Registering worker") >= workers:
            return
        time.sleep(0.5)
    raise RuntimeError(f"{workers} workers did not register: {log.read_text()[-3000:]}")

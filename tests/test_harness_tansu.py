"""harness/tansu.py's build bookkeeping, with real files, locks and processes (no cargo run):
which cached binary counts as built, how a second process waits for a build in progress, and
the clear error when cargo is absent."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import tansu


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GROUPSHIFT_CACHE", str(tmp_path))
    return tmp_path


def _install(cache: Path, features: list[str], version: str = tansu.TANSU_VERSION) -> None:
    (cache / "tansu" / "bin").mkdir(parents=True, exist_ok=True)
    (cache / "tansu" / "bin" / "tansu").write_text("#!/bin/sh\n")
    key = f"tansu {version} (registry+https://github.com/rust-lang/crates.io-index)"
    record = {"installs": {key: {"features": features, "all_features": False, "no_default_features": False}}}
    (cache / "tansu" / ".crates2.json").write_text(json.dumps(record))


def test_only_a_build_with_the_storage_feature_counts(cache: Path) -> None:
    assert not tansu.installed()
    _install(cache, [])  # default features: only the null storage engine
    assert not tansu.installed()
    _install(cache, ["dynostore"], version="0.5.9")
    assert not tansu.installed()
    _install(cache, ["dynostore"])
    assert tansu.installed()
    assert tansu.build(wait=0) == tansu.binary_path()


@pytest.mark.e2e
def test_a_second_process_waits_for_the_build_and_reports_progress(cache: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable, "-c",
            "import fcntl, sys, time; f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX); "
            "print('locked', flush=True); time.sleep(60)",
            str(cache / "tansu-build.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        (cache / "tansu-build.log").write_text("   Compiling tokio v1\n   Compiling tansu-sans-io v0.6.0\n")
        seen: list[str] = []
        started = time.monotonic()
        with pytest.raises(tansu.TansuUnavailable, match="did not finish within 3s") as info:
            tansu.build(wait=3, progress=seen.append, progress_every=1)
        assert time.monotonic() - started >= 3
        assert not info.value.tool_missing
        assert seen and "2 crates compiled; last: Compiling tansu-sans-io v0.6.0" in seen[0]
    finally:
        holder.kill()
        holder.wait()


def test_without_cargo_the_error_says_how_to_get_it(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(cache / "empty-path"))
    monkeypatch.setenv("HOME", str(cache))
    with pytest.raises(tansu.TansuUnavailable, match="cargo is not installed") as info:
        tansu.build(wait=0, progress=lambda s: None)
    assert info.value.tool_missing


@pytest.mark.e2e
def test_the_build_command_line_runs_without_the_virtualenv(cache: Path) -> None:
    """`.ci/run` calls `python3 -m harness.tansu` before the virtualenv exists: stdlib only."""
    _install(cache, ["dynostore"])
    env = {**os.environ, "GROUPSHIFT_CACHE": str(cache)}
    out = subprocess.run(
        [sys.executable, "-S", "-m", "harness.tansu", "path"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(cache / "tansu" / "bin" / "tansu")


def test_outside_ci_an_unbuilt_tansu_is_opt_in_with_the_command(cache: Path) -> None:
    """A newcomer's machine (CI unset, nothing cached) is not made to build 15 CPU-minutes of
    Rust inside a fixture: the Tansu tests skip, saying why and which command builds it."""
    reason = tansu.opt_in_skip_reason({})
    assert reason is not None and "`python -m harness.tansu build`" in reason
    assert "CI" in reason and "15 CPU-minutes" in reason
    for ci in ("true", "1", "yes"):
        assert tansu.opt_in_skip_reason({"CI": ci}) is None  # CI builds it (in the background)
    assert tansu.opt_in_skip_reason({"CI": "false"}) is not None
    # a build started by hand is waited for, not skipped
    (cache / "tansu-build.lock").touch()
    with open(cache / "tansu-build.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert tansu.build_in_progress() and tansu.opt_in_skip_reason({}) is None
        fcntl.flock(held, fcntl.LOCK_UN)
    assert not tansu.build_in_progress()
    _install(cache, ["dynostore"])
    assert tansu.opt_in_skip_reason({}) is None


@pytest.mark.e2e
def test_the_tansu_tests_skip_with_the_build_command_outside_ci(cache: Path) -> None:
    """The real module, run as the README's command runs it on a fresh machine: skipped fast,
    with the reason and the command in pytest's skip summary, and no cargo started."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["GROUPSHIFT_CACHE"] = str(cache)
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "e2e/test_upstream_tansu.py", "-q", "-rs", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parent.parent,
        timeout=240,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert " skipped" in out.stdout and " passed" not in out.stdout, out.stdout
    assert "python -m harness.tansu build" in out.stdout, out.stdout
    assert not (cache / "tansu-build.log").exists()  # no build started
    assert time.monotonic() - started < 120

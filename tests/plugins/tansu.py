"""pytest plugin: Tansu brokers (harness/tansu.py) as a session fixture (registered from the
root conftest.py).

`tansu_factory(name)` returns a started `TansuBroker` (in-memory storage, 127.0.0.1, a free
port); every broker is stopped at the end of the session. The binary is built with cargo on
first use and cached; while another process builds it (`.ci/run` starts the build in the
background at its beginning) the fixture waits, bounded, printing the build's progress past
pytest's output capture. Without cargo and without a cached binary the fixture skips with the
reason; a failed build or a broker that does not start is an error, not a skip.

Outside CI (`CI` unset, as on a newcomer's machine running the README's test command) a cold
build is not started here: it is about 15 CPU-minutes of Rust. Without a cached binary (and no
build running) the fixture skips with the reason and the command that builds it,
`python -m harness.tansu build` (`harness.tansu.opt_in_skip_reason`).

Tests that use the fixture run last in the session (`pytest_collection_modifyitems`), so a cold
build started by `.ci/run` overlaps with as much of the rest of the run as possible.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.tansu import DEFAULT_BUILD_WAIT, TansuBroker, TansuUnavailable, build, opt_in_skip_reason


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    later = [i for i in items if "tansu_factory" in getattr(i, "fixturenames", ())]
    if later:
        items[:] = [i for i in items if "tansu_factory" not in getattr(i, "fixturenames", ())] + later


class TansuFactory:
    def __init__(self, base: Path, config: pytest.Config) -> None:
        self.base = base
        self.config = config
        self.brokers: list[TansuBroker] = []
        self._binary: Path | None = None

    def _progress(self, text: str) -> None:
        capture = self.config.pluginmanager.getplugin("capturemanager")
        if capture is None:
            print(f"[tansu] {text}", file=sys.stderr, flush=True)
            return
        with capture.global_and_fixture_disabled():
            print(f"\n[tansu] {text}", file=sys.stderr, flush=True)

    def binary(self) -> Path:
        if self._binary is None:
            wait = float(os.environ.get("GROUPSHIFT_TANSU_BUILD_WAIT", DEFAULT_BUILD_WAIT))
            try:
                self._binary = build(wait=wait, progress=self._progress)
            except TansuUnavailable as exc:
                if exc.tool_missing:
                    pytest.skip(f"Tansu unavailable: {exc}")
                raise
        return self._binary

    def __call__(self, name: str = "tansu") -> TansuBroker:
        broker = TansuBroker(self.base / name, binary=self.binary())
        self.brokers.append(broker)
        return broker.start()

    def stop_all(self) -> None:
        for broker in self.brokers:
            broker.stop()


@pytest.fixture(scope="session")
def tansu_factory(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[TansuFactory]:
    if (reason := opt_in_skip_reason()) is not None:
        pytest.skip(reason)
    factory = TansuFactory(tmp_path_factory.mktemp("tansu"), request.config)
    try:
        yield factory
    finally:
        factory.stop_all()

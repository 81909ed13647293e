"""The lifetime of the Docker engine groupshift starts itself (harness.matrix.docker_engine).

Kept apart from e2e/test_matrix_docker.py, whose module fixture holds the engine for its cells.
"""

from __future__ import annotations

import pytest

from harness.matrix.docker_engine import EngineUnavailable, ensure_engine, ping


def test_own_engine_stops_when_its_last_user_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two users of the groupshift dockerd: the first to leave keeps it running for the other,
    the last one stops it (by the PID it was started with)."""
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    try:
        first = ensure_engine()
    except EngineUnavailable as e:
        print(f"no Docker engine can be started here: {e}")
        pytest.skip(f"no Docker engine can be started here: {e}")
    if first.pid is None:
        first.close()  # an engine we did not start, or ours in use by another process
        pytest.skip(f"the engine is not this test's own ({first.how}): its lifetime is not ours to check")
    second = ensure_engine()
    try:
        assert second.host == first.host
        first.close()
        assert ping(second.host) is None, "the daemon stopped while a user was left"
    finally:
        second.close()
    assert ping(first.host) is not None, "the last user left and the daemon still answers"

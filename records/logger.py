"""The records layer's structured logger, imported on first use.

`structlog` imports asyncio, about 8 MB of a process. The compaction worker
(`records.compaction_worker`) imports the records layer and never logs, so the records
modules ask for their logger here, when they have something to say, instead of importing
structlog at the top.
"""

from __future__ import annotations

from typing import Any


def get_logger() -> Any:
    """`structlog.get_logger()`, configured by whoever configured structlog (the server)."""
    import structlog

    return structlog.get_logger()

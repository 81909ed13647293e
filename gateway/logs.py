"""Structured JSON logs (structlog): one line per event, events named as dotted nouns.

Every line carries `event`, `level` and an ISO timestamp plus the event's fields, e.g.
`{"event": "connection.closed", "connection_id": 7, "reason": "frame.oversized", ...}`; tests and
operators match on `event` (the e2e harness waits for `gateway.listening`).
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog


def configure_logging(level: str = "info", stream: TextIO | None = None) -> None:
    """Render every structlog event as one JSON line on `stream` (stderr by default)."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        logger_factory=structlog.PrintLoggerFactory(stream or sys.stderr),
        cache_logger_on_first_use=True,
    )

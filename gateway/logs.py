"""Structured logs (structlog): one line per event, events named as dotted nouns.

Two renderings of the same events (`groupshift serve --log-format`): `json`, for machines and
the default when stderr is not a terminal (a pipe, a file, a log shipper), and `text`, for
people, the default on a terminal (structlog's console renderer; colours only on a terminal
with NO_COLOR unset, https://no-color.org). Every JSON line carries `event`, `level` and an ISO
timestamp plus the event's fields, e.g.
`{"event": "connection.closed", "connection_id": 7, "reason": "frame.oversized", ...}`; tests and
operators match on `event` (the e2e harness waits for `gateway.listening`).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

import structlog

LOG_FORMATS = ("text", "json")


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or file-less stream
        return False


def chosen_format(log_format: str | None, stream: TextIO) -> str:
    """The format asked for, or without one `text` on a terminal and `json` otherwise, so that
    whatever reads a pipe (the e2e harness, a log shipper) keeps getting JSON lines."""
    if log_format is not None:
        return log_format
    return "text" if _is_terminal(stream) else "json"


def renderer_for(log_format: str, stream: TextIO) -> structlog.typing.Processor:
    """The last processor: JSON lines, or the console renderer with colours only on a terminal
    and without NO_COLOR."""
    if log_format == "json":
        return structlog.processors.JSONRenderer()
    colours = _is_terminal(stream) and not os.environ.get("NO_COLOR")
    return structlog.dev.ConsoleRenderer(colors=colours)


def configure_logging(
    level: str = "info", stream: TextIO | None = None, log_format: str | None = None
) -> None:
    """Render every structlog event as one line on `stream` (stderr by default), as JSON or
    text (`chosen_format`)."""
    out = stream or sys.stderr
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer_for(chosen_format(log_format, out), out),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        # One write per line (message and newline together; `print` writes them apart): the
        # workers of `serve --workers N` share the supervisor's stderr, and a line of one
        # process must never be cut by another's (docs/workers.md).
        logger_factory=structlog.WriteLoggerFactory(out),
        cache_logger_on_first_use=True,
    )

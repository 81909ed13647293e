"""Where the membership client's log events go: named events with fields, as structlog logs them.

The client names each event (`membership.coordinator_lost`, `membership.fatal`, ...) and gives
its fields; the application chooses the sink. A structlog logger fits as it is (groupshift's
fleet passes its own, so the events land in the server's JSON log); the default writes through
the standard library's `logging` (logger `membership`), which an application configures as it
likes and which stays silent below WARNING when it does not.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol


class EventLog(Protocol):
    def info(self, event: str, **fields: Any) -> Any: ...

    def warning(self, event: str, **fields: Any) -> Any: ...

    def error(self, event: str, **fields: Any) -> Any: ...


class StdlibEventLog:
    """`EventLog` over a standard-library logger: `event key=value ...` lines."""

    def __init__(self, name: str = "membership") -> None:
        self._logger = logging.getLogger(name)

    def _emit(self, level: int, event: str, fields: dict[str, Any]) -> None:
        exc_info = fields.pop("exc_info", None)
        if self._logger.isEnabledFor(level):
            text = " ".join(f"{k}={v!r}" for k, v in fields.items())
            self._logger.log(level, "%s %s", event, text, exc_info=exc_info)

    def info(self, event: str, **fields: Any) -> None:
        self._emit(logging.INFO, event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._emit(logging.WARNING, event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._emit(logging.ERROR, event, fields)

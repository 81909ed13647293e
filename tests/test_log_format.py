"""`groupshift serve --log-format text|json` (gateway.logs): JSON lines unless asked otherwise or
stderr is a terminal, where people read text; colours only on a terminal without NO_COLOR."""

from __future__ import annotations

import io
import json

import pytest
import structlog

from gateway.logs import chosen_format, configure_logging, renderer_for


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_pipe_gets_json_and_a_terminal_text_by_default() -> None:
    assert chosen_format(None, io.StringIO()) == "json"
    assert chosen_format(None, Terminal()) == "text"
    assert chosen_format("json", Terminal()) == "json"
    assert chosen_format("text", io.StringIO()) == "text"


def test_json_lines_on_a_pipe() -> None:
    out = io.StringIO()
    configure_logging("info", stream=out)
    try:
        structlog.get_logger("t").info("gateway.listening", message="listening on 127.0.0.1:9092", port=9092)
    finally:
        structlog.reset_defaults()
    line = json.loads(out.getvalue())
    assert (line["event"], line["message"], line["port"]) == (
        "gateway.listening",
        "listening on 127.0.0.1:9092",
        9092,
    )


def test_text_has_no_colour_codes_on_a_pipe_or_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    configure_logging("info", stream=out, log_format="text")
    try:
        structlog.get_logger("t").info("gateway.listening", port=9092)
    finally:
        structlog.reset_defaults()
    text = out.getvalue()
    assert "gateway.listening" in text and "port=9092" in text and "\x1b[" not in text
    assert not text.lstrip().startswith("{")
    monkeypatch.setenv("NO_COLOR", "1")
    rendered = renderer_for("text", Terminal())(None, "info", {"event": "x", "level": "info"})
    assert "\x1b[" not in str(rendered)
    monkeypatch.delenv("NO_COLOR")
    coloured = renderer_for("text", Terminal())(None, "info", {"event": "x", "level": "info"})
    assert "\x1b[" in str(coloured)


class Writes(io.StringIO):
    """A stream that remembers each write call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def write(self, s: str) -> int:
        self.calls.append(s)
        return super().write(s)


def test_each_line_is_one_write() -> None:
    """The workers of `serve --workers N` share one stderr: a line written in two calls (the
    message, then the newline) can have another process's line land in between."""
    out = Writes()
    configure_logging("info", stream=out)
    try:
        log = structlog.get_logger("t")
        log.info("workers.serving", workers=2)
        log.info("gateway.listening", port=9092)
    finally:
        structlog.reset_defaults()
    assert len(out.calls) == 2 and all(c.endswith("\n") and c.count("\n") == 1 for c in out.calls)

"""How a setting's value appears in an error message: `repr`, cut after `MAX_SHOWN_CHARS`
characters with the full length said. A 20 MB value must not become a 20 MB line (the
robustness issue's finding), and the operator still sees what the value was. Shared by the
settings model (gateway/config.py) and the listener parser (gateway/listeners.py), which the
settings model imports."""

from __future__ import annotations

# Values longer than this are cut in error messages.
MAX_SHOWN_CHARS = 200


def shown_value(value: object) -> str:
    """`repr(value)` for an error message, cut after `MAX_SHOWN_CHARS` characters with the
    full length said."""
    text = repr(value)
    if len(text) <= MAX_SHOWN_CHARS:
        return text
    size = len(value) if isinstance(value, str | bytes) else len(text)
    return f"{text[:MAX_SHOWN_CHARS]}...({size} characters)"

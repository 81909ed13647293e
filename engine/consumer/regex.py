"""Regular-expression subscriptions (KIP-848 "Subscription", Kafka 4.0 `maybeUpdateRegularExpressions`).

Kafka evaluates subscription regexes with RE2/J and a *full* match of the topic name, so
`^topic*` does not match `topic-1`; we use google-re2 for the same syntax. An empty regex means
"no regex" (librdkafka sends `""` beside topic names).

Difference from shipped Kafka, on purpose: Kafka resolves regexes asynchronously, at most every
10 s, and the member gets its topics on a later heartbeat. Here resolution is synchronous in the
operation that needs it (a new regex, or a metadata change seen by a heartbeat), which the
sans-IO engine can afford and which keeps every step deterministic. The records written
(ConsumerGroupRegularExpression, type 16) are the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import re2

from engine.errors import CoordinatorError, Errors

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # an invalid pattern is an answer to the client, not a server log


# google-re2 (C++ RE2) error texts -> the descriptions RE2/J, which Kafka uses, gives for the same
# errors; Kafka's error message ends with that description.
_RE2J_DESCRIPTIONS = {
    "invalid escape sequence": "invalid escape sequence",
    "invalid character class": "invalid character class",
    "invalid character class range": "invalid character class range",
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    # RE2/J has no "unexpected )" text: it reports its internal error for an unmatched `)`.
    "unexpected )": "regexp/syntax: internal error",
    "extra )": "regexp/syntax: internal error",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid named capture group": "invalid named capture",
}


def _re2j_description(reason: str) -> str:
    """The RE2/J description of a google-re2 error (`"missing ]: [a-"` -> `"missing closing ]"`)."""
    code = reason.split(":", 1)[0].strip()
    return _RE2J_DESCRIPTIONS.get(code, reason)


@lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> Any:
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as e:
        reason = e.args[0].decode() if e.args and isinstance(e.args[0], bytes) else str(e)
        description = _re2j_description(reason)
        raise CoordinatorError(
            Errors.INVALID_REGULAR_EXPRESSION,
            f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {description}.",
        ) from None


def validate(pattern: str) -> None:
    compile_regex(pattern)


def resolve(pattern: str, topic_names: Iterable[str]) -> frozenset[str]:
    compiled = compile_regex(pattern)
    return frozenset(t for t in topic_names if compiled.fullmatch(t) is not None)

"""Regular-expression subscriptions (KIP-848 "Subscription", Kafka 4.0 `maybeUpdateRegularExpressions`).

Kafka evaluates subscription regexes with RE2/J and a *full* match of the topic name, so
`^topic*` does not match `topic-1`; we use google-re2 for the same syntax. An empty regex means
"no regex" (librdkafka sends `""` beside topic names).

Difference from shipped Kafka, on purpose: Kafka resolves regexes asynchronously, at most every
10 s, and the member gets its topics on a later heartbeat. Here resolution is synchronous in the
operation that needs it (a new regex, or a metadata change seen by a heartbeat), which the
sans-IO engine can afford and which keeps every step deterministic. The records written
(ConsumerGroupRegularExpression, type 16) are the same.

What makes it affordable on the one event loop that serves every group (Kafka resolves on its
background threads instead): `resolve_image` caches each regex's topics per metadata image,
shared by every group and shard, and a newer image costs only its changed names (images derived
from one another share their entries, so the difference is found without matching anything);
and a name is matched by RE2 directly on its ASCII bytes (legal topic names are ASCII), not
through the `re`-compatible wrapper, about three times faster.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

import re2

from engine.errors import CoordinatorError, Errors
from engine.metadata import MetadataImage

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
    """The names of `topic_names` that `pattern` fully matches."""
    matches = _matcher(pattern)
    return frozenset(t for t in topic_names if matches(t))


@lru_cache(maxsize=1024)
def _matcher(pattern: str) -> Callable[[str], bool]:
    """A full-match test for one topic name; RE2's own `Match` on the name's bytes when this
    google-re2 exposes it (topic names are ASCII, so byte and character offsets agree)."""
    compiled = compile_regex(pattern)
    raw = getattr(compiled, "_regexp", None)
    anchor = getattr(getattr(getattr(re2, "_re2", None), "RE2", None), "Anchor", None)
    if raw is None or anchor is None or not hasattr(raw, "Match"):  # pragma: no cover - other builds
        return lambda name: compiled.fullmatch(name) is not None
    both = anchor.ANCHOR_BOTH
    match = raw.Match

    def matches(name: str) -> bool:
        if not name.isascii():  # never a legal topic name; the wrapper handles the offsets
            return compiled.fullmatch(name) is not None
        data = name.encode()
        return bool(match(both, data, 0, len(data))[0][0] != -1)

    return matches


# pattern -> (the image it was resolved against, its topics); least recently used first
_RESOLVED: OrderedDict[str, tuple[weakref.ref[MetadataImage], frozenset[str]]] = OrderedDict()
RESOLVED_CACHE_SIZE = 1024


def resolve_image(pattern: str, image: MetadataImage) -> frozenset[str]:
    """`resolve(pattern, image.topic_names())`, cached per (regex, image): every group and shard
    asking for the same regex against the same image shares one resolution, and an image newer
    than the cached one re-matches only the names that changed between them."""
    cached = _RESOLVED.get(pattern)
    topics: frozenset[str] | None = None
    if cached is not None:
        base = cached[0]()
        if base is image:
            _RESOLVED.move_to_end(pattern)
            return cached[1]
        if base is not None:
            changed = base.changed_topic_names(image)
            if len(changed) < len(image):
                matches = _matcher(pattern)
                kept = {t for t in cached[1] if t not in changed}
                kept.update(t for t in changed if image.topic(t) is not None and matches(t))
                topics = frozenset(kept)
    if topics is None:
        topics = resolve(pattern, image.topic_names())
    _RESOLVED[pattern] = (weakref.ref(image), topics)
    _RESOLVED.move_to_end(pattern)
    while len(_RESOLVED) > RESOLVED_CACHE_SIZE:
        _RESOLVED.popitem(last=False)
    return topics

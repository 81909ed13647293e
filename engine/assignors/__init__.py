"""Server-side assignors and their registry (`group.consumer.assignors`)."""

from __future__ import annotations

from engine.assignors.base import (
    Assignor,
    GroupSpec,
    MapTopicDescriber,
    MemberSubscription,
    PartitionAssignorError,
    SubscriptionType,
    TopicDescriber,
)

_REGISTRY: dict[str, Assignor] = {}


def register(assignor: Assignor) -> None:
    _REGISTRY[assignor.name] = assignor


def get(name: str) -> Assignor:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown assignor {name!r}; known: {sorted(_REGISTRY)}") from None


def names() -> list[str]:
    return list(_REGISTRY)


def _register_builtins() -> None:
    from engine.assignors.range import RangeAssignor
    from engine.assignors.uniform import UniformAssignor

    register(UniformAssignor())
    register(RangeAssignor())


_register_builtins()

__all__ = [
    "Assignor",
    "GroupSpec",
    "MapTopicDescriber",
    "MemberSubscription",
    "PartitionAssignorError",
    "SubscriptionType",
    "TopicDescriber",
    "get",
    "names",
    "register",
]

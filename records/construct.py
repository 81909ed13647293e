"""Fast positional constructors for the frozen slotted record dataclasses, for the decoders.

A frozen dataclass's `__init__` sets each field with `object.__setattr__`, about 0.1 µs a field:
for an offset commit (key, value, record: ten fields) that is as much as decoding its bytes.
The decoders instead build objects with `object.__new__` and the classes' own slot descriptors,
which is what `__init__` amounts to for these classes (no `__post_init__`, no validation) at
about half the cost. The result is an ordinary instance: equal, hashable and immutable as if
built by `__init__`. `positional_constructor` refuses a class where that would not hold.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["positional_constructor"]

T = TypeVar("T")


def positional_constructor(cls: type[T]) -> Callable[..., T]:
    """Return `make(field1, field2, ...)` -> instance of `cls`, every field given in order."""
    if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__} is not a frozen dataclass")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__ that the constructor would skip")
    names = [f.name for f in dataclasses.fields(cls)]
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    for name in names:
        slot = cls.__dict__.get(name)
        if not isinstance(slot, types.MemberDescriptorType):
            raise TypeError(f"{cls.__name__}.{name} is not a slot")
        namespace[f"_set_{name}"] = slot.__set__
    body = "".join(f"    _set_{name}(obj, {name})\n" for name in names)
    source = f"def make({', '.join(names)}):\n    obj = _new(_cls)\n{body}    return obj\n"
    exec(compile(source, f"<constructor of {cls.__name__}>", "exec"), namespace)
    make: Callable[..., T] = namespace["make"]
    make.__doc__ = f"Build a {cls.__name__} from all its fields, in order, without __init__."
    return make

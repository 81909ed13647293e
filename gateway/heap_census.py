"""A census of the interpreter's heap: which kinds of objects, and which big containers, a
serving gateway keeps.

No Kafka behaviour; this serves issue 27's soak bound (RSS flat after warm-up,
docs/robustness.md, Soak). tracemalloc says exactly which line allocated what is still alive,
but it slows every allocation, and a 10,000-member soak under tracing falls behind, fences its
members and measures its own backlog. A census costs nothing between samples: every
`GROUPSHIFT_HEAP_CENSUS_EVERY` seconds (default 300) a daemon thread walks the objects the cycle
collector tracks (containers and instances: what can keep memory alive), counts them and their
shallow sizes by type, and names the biggest containers by the attribute that holds them
(`Owner.attribute`), so two samples show which table grows. Debug hook, off by default:
`GROUPSHIFT_HEAP_CENSUS=DIR` writes `census-NNNN.json` there; `python -m bench.memory_growth
--census DIR` compares two of them.
"""

from __future__ import annotations

import gc
import itertools
import json
import random
import sys
import threading
import time
from array import array
from collections import Counter
from pathlib import Path
from typing import Any

BIG_CONTAINER_BYTES = 32 * 1024  # containers at least this big are named one by one
NAMED_CONTAINERS = 60  # the biggest this many are named (each costs a referrer search)
EXAMPLES = 12  # objects kept per shape, to ask who holds the shapes that grow
GROWN_SHAPES = 4  # the shapes that grew most are traced to their holders
SHAPES = 200  # the most common dict and tuple shapes kept per sample
UNTRACKED_KINDS = (dict, list, set, frozenset, tuple, bytes, bytearray, array, str, int, float)


def census(previous_shapes: dict[str, int] | None = None) -> dict[str, Any]:
    """One sample: tracked objects by type (count, shallow bytes), dict and tuple shapes, the
    biggest containers, and (given the previous sample's shapes) who holds a few objects of the
    shapes that grew most since, as chains of holders."""
    objects = gc.get_objects()
    # Dicts, lists and sets that hold only atomic values (a str -> int table, an empty dict)
    # are not tracked by the collector, nor are strings and numbers: two steps of referents
    # from the tracked objects find them (what an untracked table holds is the second step).
    seen = {id(o) for o in objects}
    frontier: list[Any] = objects
    for _ in range(2):
        found = []
        # A dict whose keys are all strings does not report its keys as referents.
        keys = [key for d in frontier if type(d) is dict for key in d]
        for ref in itertools.chain(gc.get_referents(*frontier), keys):
            if isinstance(ref, UNTRACKED_KINDS) and id(ref) not in seen:
                seen.add(id(ref))
                found.append(ref)
        objects.extend(found)
        frontier = [o for o in found if isinstance(o, (dict, list, set, frozenset, tuple))]
    del seen, frontier
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    shapes: Counter[str] = Counter()
    examples: dict[str, list[Any]] = {}
    big: list[tuple[int, Any]] = []
    for obj in objects:
        kind = type(obj).__qualname__
        size = sys.getsizeof(obj, 0)
        counts[kind] += 1
        sizes[kind] += size
        if type(obj) is dict or type(obj) is tuple:
            shape = _shape(obj)
            shapes[shape] += 1
            kept = examples.setdefault(shape, [])
            if len(kept) < EXAMPLES:
                kept.append(obj)
            elif random.random() < EXAMPLES / shapes[shape]:
                kept[random.randrange(EXAMPLES)] = obj  # a uniform sample of the shape
        if size >= BIG_CONTAINER_BYTES:
            big.append((size, obj))
    big.sort(key=lambda pair: pair[0], reverse=True)
    named = [
        {"size": size, "type": type(obj).__qualname__, "len": _length(obj), "held_by": _holder(obj)}
        for size, obj in big[:NAMED_CONTAINERS]
    ]
    holders: dict[str, dict[str, int]] = {}
    if previous_shapes is not None:
        grown = sorted(shapes, key=lambda k: shapes[k] - previous_shapes.get(k, 0), reverse=True)
        ours = {id(objects), id(examples), *(id(kept) for kept in examples.values())}
        for shape in grown[:GROWN_SHAPES]:
            if shapes[shape] - previous_shapes.get(shape, 0) < 100:
                break
            chains: Counter[str] = Counter()
            for example in examples[shape]:
                chains[_chain(example, ours)] += 1
            holders[shape] = dict(chains.most_common())
    del objects, big, examples
    return {
        "growing_holders": holders,
        "time": time.time(),
        "blocks": sys.getallocatedblocks(),
        "tracked": sum(counts.values()),
        "by_type": {kind: [counts[kind], sizes[kind]] for kind in counts},
        "big": named,
        "shapes": dict(shapes.most_common(SHAPES)),
    }


def _shape(obj: dict[Any, Any] | tuple[Any, ...]) -> str:
    """What kind of dict or tuple this is, by its keys or item types: small dicts with string
    keys by their key names (a record, a decoded request), others by key type and size."""
    n = len(obj)
    size = 1 << max(n - 1, 0).bit_length()  # n rounded up to a power of two
    if not isinstance(obj, dict):
        if n > 6:
            return f"tuple len<={size}"
        return "(" + ",".join(type(item).__qualname__ for item in obj) + ")"
    keys = list(itertools.islice(obj, 12))
    if n <= 12 and all(type(k) is str for k in keys):
        return "{" + ",".join(sorted(keys))[:160] + "}"
    first = type(keys[0]).__qualname__ if keys else "-"
    values = {type(v).__qualname__ for v in itertools.islice(obj.values(), 4)}
    return f"dict[{first}, {'|'.join(sorted(values))}] len<={size}"


def _key_of(container: dict[Any, Any], value: Any) -> Any:
    """The key under which `container` holds `value` (a plain loop: a generator expression
    would hold `value` in a closure cell, and be found as one of its holders)."""
    for key, held in container.items():
        if held is value:
            return key
    return None


def _chain(obj: Any, ours: set[int], depth: int = 5) -> str:
    """Who holds `obj`, who holds that, ...: `Owner.attribute <- ...`, ignoring the census's
    own lists and any frame."""
    labels = []
    for _ in range(depth):
        refs = []
        for ref in gc.get_referrers(obj):
            if id(ref) not in ours and type(ref).__name__ not in ("frame", "list_iterator"):
                refs.append(ref)
        if not refs:
            break
        ours.add(id(refs))
        # An attribute of an instance says the most; a closure cell or a container the least.
        refs.sort(key=_instance_first)
        ref = refs[0]
        label, nxt = type(ref).__qualname__, ref
        if isinstance(ref, dict):
            attr = _key_of(ref, obj)
            owner = None
            for candidate in gc.get_referrers(ref):
                if getattr(candidate, "__dict__", None) is ref:
                    owner = candidate
                    break
            if owner is not None:
                label, nxt = f"{type(owner).__qualname__}.{attr}", owner
            else:
                label = f"dict[{type(attr).__qualname__} key]"
        else:
            attrs = getattr(ref, "__dict__", None)
            if isinstance(attrs, dict):
                attr = _key_of(attrs, obj)
                if attr is not None:
                    label = f"{type(ref).__qualname__}.{attr}"
            for slot in getattr(type(ref), "__slots__", ()):
                if isinstance(slot, str) and getattr(ref, slot, None) is obj:
                    label = f"{type(ref).__qualname__}.{slot}"
        labels.append(f"{label}({len(refs)})")
        obj = nxt
    return " <- ".join(labels)


def _instance_first(ref: Any) -> int:
    return 0 if hasattr(ref, "__dict__") and not isinstance(ref, type) else 1


def _length(obj: Any) -> int:
    try:
        return len(obj)
    except TypeError:
        return -1


def _holder(obj: Any) -> str:
    """`Owner.attribute` for the first object that holds `obj` in an attribute (its `__dict__`
    or a slot), else the kinds of its first referrers."""
    kinds = []
    for ref in gc.get_referrers(obj)[:8]:
        if isinstance(ref, dict):
            attr = next((k for k, v in ref.items() if v is obj), None)
            owners = [o for o in gc.get_referrers(ref)[:8] if getattr(o, "__dict__", None) is ref]
            if owners:
                return f"{type(owners[0]).__qualname__}.{attr}"
            if attr is not None:
                kinds.append(f"dict[{str(attr)[:40]}]")
                continue
        # 3.11 keeps most instances' attributes inline: the instance itself is the referrer.
        attrs = getattr(ref, "__dict__", None)
        if isinstance(attrs, dict):
            attr = next((k for k, v in attrs.items() if v is obj), None)
            if attr is not None:
                return f"{type(ref).__qualname__}.{attr}"
        if type(ref).__name__ == "cell":
            for closure in gc.get_referrers(ref)[:4]:
                for fn in gc.get_referrers(closure)[:4]:
                    if getattr(fn, "__closure__", None) is closure:
                        return f"closure of {fn.__qualname__}"
        for slot in getattr(type(ref), "__slots__", ()):
            if getattr(ref, slot, None) is obj:
                return f"{type(ref).__qualname__}.{slot}"
        kinds.append(type(ref).__qualname__)
    return " | ".join(kinds) or "?"


def start_census(out_dir: Path, every_s: float) -> None:
    """Write a census to `out_dir` every `every_s` seconds from a daemon thread."""
    out_dir.mkdir(parents=True, exist_ok=True)

    def sample_forever() -> None:
        n = 0
        previous: dict[str, int] | None = None
        while True:
            time.sleep(every_s)
            n += 1
            sample = census(previous)
            previous = sample["shapes"]
            (out_dir / f"census-{n:04d}.json").write_text(json.dumps(sample))

    threading.Thread(target=sample_forever, name="heap-census", daemon=True).start()


def compare(first: dict[str, Any], last: dict[str, Any], top: int) -> dict[str, Any]:
    """The types whose shallow bytes grew most, and the named containers' growth."""
    rows = []
    for kind, (count, size) in last["by_type"].items():
        before_count, before_size = first["by_type"].get(kind, [0, 0])
        rows.append({"type": kind, "count_diff": count - before_count, "size_diff": size - before_size})
    rows.sort(key=lambda r: r["size_diff"], reverse=True)
    before_big = {(b["held_by"], b["type"]): b for b in first["big"]}
    big = []
    for b in last["big"]:
        prior = before_big.get((b["held_by"], b["type"]))
        grown = b["size"] - (prior["size"] if prior else 0)
        big.append({**b, "size_diff": grown, "len_before": prior["len"] if prior else None})
    big.sort(key=lambda r: r["size_diff"], reverse=True)
    before_shapes = first.get("shapes", {})
    shape_rows = [
        {"shape": shape, "count_diff": count - before_shapes.get(shape, 0)}
        for shape, count in last.get("shapes", {}).items()
    ]
    shape_rows.sort(key=lambda r: r["count_diff"], reverse=True)
    return {
        "shapes": shape_rows[:top],
        "minutes": round((last["time"] - first["time"]) / 60, 1),
        "blocks_diff": last["blocks"] - first["blocks"],
        "tracked_diff": last["tracked"] - first["tracked"],
        "types": rows[:top],
        "containers": big[:top],
    }

"""The job's table schemas, written once as Spark DDL strings and turned into Arrow schemas here
(the Python workers build Arrow batches without a SparkContext, so pyspark's own DDL parser,
which asks the JVM, is not available to them)."""

from __future__ import annotations

from functools import cache

import pyarrow as pa

_SCALARS = {
    "string": pa.string(),
    "int": pa.int32(),
    "long": pa.int64(),
    "double": pa.float64(),
    "binary": pa.binary(),
    "boolean": pa.bool_(),
}


def _split(text: str) -> list[str]:
    """Split on the commas that are not inside <...>."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def _type(text: str) -> pa.DataType:
    t = text.strip()
    if t in _SCALARS:
        return _SCALARS[t]
    if t.startswith("array<") and t.endswith(">"):
        return pa.list_(_type(t[6:-1]))
    if t.startswith("struct<") and t.endswith(">"):
        return pa.struct(_fields(t[7:-1]))
    raise ValueError(f"unsupported type {t!r}")


def _fields(ddl: str) -> list[pa.Field]:
    fields = []
    for item in _split(ddl):
        name, _, kind = item.partition(" ")
        fields.append(pa.field(name.strip("`"), _type(kind)))
    return fields


@cache
def arrow_schema(ddl: str) -> pa.Schema:
    return pa.schema(_fields(ddl))


def columns(ddl: str) -> list[str]:
    return [f.name for f in arrow_schema(ddl)]

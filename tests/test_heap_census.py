"""gateway.heap_census: a table that grows between two samples is named by the attribute that
holds it, even when the collector does not track it (a str -> int dict)."""

from __future__ import annotations

from gateway.heap_census import census, compare


class _Registry:
    def __init__(self) -> None:
        self.offsets: dict[str, int] = {}


def test_a_growing_untracked_table_is_named_by_its_holder() -> None:
    registry = _Registry()
    registry.offsets.update((f"member-{i}", i) for i in range(2_000))
    first = census()
    registry.offsets.update((f"member-{i}", i) for i in range(2_000, 60_000))
    last = census()
    result = compare(first, last, top=20)
    top = result["containers"][0]
    assert top["held_by"] == "_Registry.offsets"
    assert (top["len_before"], top["len"]) == (2_000, 60_000)
    assert top["size_diff"] > 1_000_000
    assert result["types"][0]["type"] in {"dict", "str"}
    assert next(r for r in result["types"] if r["type"] == "str")["count_diff"] >= 58_000


def test_dicts_are_counted_by_shape_and_closures_name_their_function() -> None:
    def make_cache() -> object:
        table: dict[str, int] = {}

        def lookup(key: str) -> int:
            return table.setdefault(key, len(table))

        return lookup

    lookup = make_cache()
    first = census()
    for i in range(50_000):
        lookup(f"k{i}")  # type: ignore[operator]
    records = [{"group_id": f"g{i}", "member_id": "m", "epoch": i} for i in range(3_000)]
    last = census()
    result = compare(first, last, top=10)
    shapes = {row["shape"]: row["count_diff"] for row in result["shapes"]}
    assert shapes["{epoch,group_id,member_id}"] >= 3_000
    assert result["containers"][0]["held_by"].startswith("closure of ")
    assert "make_cache" in result["containers"][0]["held_by"]
    del records


class _Keeper:
    def __init__(self) -> None:
        self.kept: list[dict[str, int]] = []


class _Service:
    def __init__(self) -> None:
        self.keeper = _Keeper()


def test_the_holders_of_a_growing_shape_are_traced_to_the_owning_attribute() -> None:
    service = _Service()
    first = census()
    service.keeper.kept.extend({"offset": i, "epoch": i} for i in range(2_000))
    last = census(first["shapes"])
    chains = last["growing_holders"]["{epoch,offset}"]
    assert sum(chains.values()) > 0
    assert all(chain.startswith("list(1) <- _Keeper.kept(1) <- _Service.keeper(1)") for chain in chains)

"""The chaos simulator with client-side assignors (sim/client_assignment_chaos.py,
docs/simulation.md): the bounded slice CI runs, and that its faults and its checks do happen.

Longer: `CSIM_SEEDS=1000 CSIM_STEPS=1000 pytest tests/test_client_assignment_chaos.py`, or with
figures `groupshift simulate --chaos --client-assignors --seed 1000 --steps 1000 --seeds 1000
--keep-going`."""

from __future__ import annotations

import functools
import os

from engine.consumer.member import ConsumerGroupMember
from records.consumer_group import ClassicMemberMetadata, ClassicProtocol, ClientAssignorMetadata
from sim.chaos import main
from sim.client_assignment_chaos import ClientAssignorMachine, expected_choice, run_seed
from tests.chaos_slices import run_slice

SEEDS = int(os.environ.get("CSIM_SEEDS", "20"))
STEPS = int(os.environ.get("CSIM_STEPS", "200"))


def test_client_assignor_chaos_slice() -> None:
    """SEEDS seeds of STEPS faulty steps, a quiet tail and the settling: 0 violations, and every
    kind of client-assignor event and fault occurred (a slice that injects nothing proves
    nothing)."""
    run_slice(
        functools.partial(main, machine=ClientAssignorMachine),
        SEEDS,
        STEPS,
        (
            "COMPUTE_ASSIGNMENT",
            "InstallAssignment NONE",
            "InstallAssignment NONE (assignor error)",
            "InstallAssignment REBALANCE_IN_PROGRESS",
            "computation held over a step",
            "old install sent again",
            "assignor_metadata_change",
            "hung assigning member fenced",
            "join refused UNSUPPORTED_ASSIGNOR",
            "step with a client assignor chosen",
            "crash_server",
            "append failed",
        ),
    )


def test_a_seed_replays_exactly() -> None:
    a, b = run_seed(5, 120), run_seed(5, 120)
    assert a.stats == b.stats and a.digest == b.digest


def ca(name: str, lo: int, hi: int, version: int) -> ClientAssignorMetadata:
    return ClientAssignorMetadata(name, lo, hi, 0, version, b"")


def test_the_oracle_reads_the_rules() -> None:
    """The oracle the simulator checks the engine against: A [1-5], B [3-4], C [2-4] at
    versions 5, 4, 2 choose A (the KIP's example); a classic member counts as -1 and supports
    only its protocols' names."""
    members = [
        ConsumerGroupMember("B", client_assignors=(ca("x", 3, 4, 4),)),
        ConsumerGroupMember("C", client_assignors=(ca("x", 2, 4, 2),)),
        ConsumerGroupMember("A", client_assignors=(ca("x", 1, 5, 5),)),
    ]
    got = expected_choice(members)
    assert got is not None and (got.name, got.assigning, sorted(got.versions)) == ("x", "A", [2, 4, 5])
    classic = ConsumerGroupMember(
        "K", classic_member_metadata=ClassicMemberMetadata(10_000, (ClassicProtocol("x", b""),))
    )
    got = expected_choice([*members, classic])
    assert got is not None and got.assigning is None and -1 in got.versions
    reads_classic = ConsumerGroupMember("D", client_assignors=(ca("y", -1, 0, 0), ca("x", -1, 9, 0)))
    got = expected_choice([reads_classic, *members, classic])
    assert got is not None and (got.name, got.assigning) == ("x", "D")

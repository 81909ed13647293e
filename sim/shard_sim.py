"""One shard runtime on the chaos simulator's clock, loop and disk, for the simulators whose
clients call the engine `Shard` directly (docs/simulation.md): streams groups (KIP-1071,
sim/streams_chaos.py) and Connect groups on the new protocol (sim/connect_chaos.py).

`ShardSimMachine` holds what both do alike: the real shard runtime (gateway/groups/runtime.py:
group commit, records before responses, the loop timer, the reload after a storage failure) and
`CoordinatorStorage` over sim/chaos.py's `VirtualLoop`, `SimDisk` and `SimLog`; a replica shard fed
every journaled record (replay equals live); a request run as the gateway runs it (its answer,
or None when the client never sees one); the virtual clock moved timer by timer; a server crash
(kill, or power loss tearing the unsynced tail) and its restart from the log (the parts it shares
with sim/chaos.py's `SimMachine` are `sim.chaos.SimServer`); the server-side faults and the end
of a step.

A subclass sets its own state after `super().__init__` and then starts the server
(`self.runtime = self._new_runtime()`), names its group (`GROUP_ID`) and its coordinator settings
(`coordinator_config`), and implements the `SeedMachine` protocol of sim/chaos.py.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any, ClassVar

from engine.classic.group import ClassicGroup
from engine.classic.state import ClassicGroupState
from engine.config import CoordinatorConfig
from engine.ids import SeededIds
from engine.metadata import MetadataImage
from engine.outcome import Outcome
from engine.shard import Shard
from gateway.coordinator_storage import CoordinatorStorage, load_shard
from records.coordinator import CoordinatorRecord
from sim.chaos import SimDisk, SimLog, SimServer
from translation.migration import Migration


class ShardSimMachine(SimServer):
    """A shard runtime on simulated parts, for clients that call the `Shard` (see the module)."""

    NAME: str  # the summary line of `groupshift simulate --chaos ...`
    CLI_FLAG: str  # the reproduce line
    GROUP_ID: ClassVar[str]  # the one group the clients use

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.disk = SimDisk(rng)
        self.now = 10_000
        self.reloads = 0
        self.stats: dict[str, int] = {}
        self.log: list[CoordinatorRecord] = []
        self.classic_unsynced = False

    def coordinator_config(self) -> CoordinatorConfig:
        raise NotImplementedError

    @property
    def image(self) -> MetadataImage:
        """The cluster's topics (none by default)."""
        return MetadataImage([])

    # --- the server ----------------------------------------------------------------------------

    def _open_storage(self, now: int) -> CoordinatorStorage:
        self.reloads += 1
        storage = CoordinatorStorage.load(
            SimLog(self.disk),  # type: ignore[arg-type]
            config=self.coordinator_config(),
            ids=SeededIds(1000 + self.reloads),
            image=self.image,
            now_ms=now,
        )
        replica = Shard(self.coordinator_config(), SeededIds(0), self.image, migration=Migration)
        return self._follow_journal(storage, replica)

    @property
    def shard(self) -> Shard:
        shard: Shard = self.runtime.shard
        return shard

    @property
    def classic_group(self) -> ClassicGroup | None:
        g = self.shard.groups.get(self.GROUP_ID)
        return g if isinstance(g, ClassicGroup) else None

    def _on_event(self, name: str, fields: dict[str, Any]) -> None:
        if name == "append.failed":
            self._note("append failed")
            if self.classic_group is not None:
                # A classic group changes in place and learns of the failure afterwards (as in
                # Kafka, and as sim/chaos.py has it): until its next GroupMetadata record, the
                # log may hold an older state.
                self.classic_unsynced = True
        elif name == "group.converted":
            self._note(f"group converted to {fields.get('to_type')}")
        elif name == "group.conversion_refused":
            self._note(f"conversion refused ({fields.get('reason')})")

    def _request(self, send: Callable[[Shard], Outcome[Any]]) -> Any:
        """Run one request as the gateway does; its answer, or None when the client never sees
        one (the connection closed, or the answer waits on a stalled fsync past the timeout)."""
        result = self.runtime.run(lambda shard, _now: send(shard))
        self._drain()
        if isinstance(result, asyncio.Future):
            if result.done() and result.exception() is None:
                return result.result()
            if result.done():
                self._note("request failed (storage)")
            else:
                self._note("response delayed past the timeout")
                result.add_done_callback(_consume)
            return None
        return result

    def _update_metadata(self) -> None:
        image = self.image
        result = self.runtime.run(lambda shard, now: shard.update_metadata(image, now))
        if isinstance(result, asyncio.Future):
            result.add_done_callback(_consume)
        self._drain()

    # --- time and the server -------------------------------------------------------------------

    def advance(self, ms: int) -> None:
        self._advance_clock(ms)

    def crash_server(self, power_loss: bool) -> None:
        """The process dies (SIGKILL: the page cache survives; power loss: the unsynced tail is
        torn) and restarts from the log; nothing of the old loop runs."""
        if power_loss:
            self._power_loss()
        self.runtime = self._new_runtime()

    # --- faults and steps ----------------------------------------------------------------------

    NAMES: ClassVar[tuple[str, ...]]  # the clients' names: each step picks one

    def actions(self, faults: bool) -> list[tuple[str, float]]:
        """The machine's own actions (clients, admin, time) and, when `faults`, its own faults,
        with their weights in a step's draw; `SERVER_FAULTS` come after them."""
        raise NotImplementedError

    def act_on(self, action: str, name: str) -> bool:
        """Run the machine's own `action` on client `name`; False when it is not one of them."""
        raise NotImplementedError

    # The actions every machine has, on client `name` (a step draws them by these names).

    def leave(self, name: str) -> None:
        """A clean shutdown (`leave`)."""
        raise NotImplementedError

    def crash(self, name: str) -> None:
        """The client dies without a word (`crash_client`): its session expires."""
        raise NotImplementedError

    def lose(self, name: str) -> None:
        """The client's next request is processed and its answer lost (`lose`)."""
        raise NotImplementedError

    def retry(self, name: str) -> None:
        """An answer lost, then the client's retry (`duplicate`)."""
        raise NotImplementedError

    def admin_reads(self) -> None:
        """Describe and list (`admin`): they must not fail."""
        raise NotImplementedError

    def delete_group(self) -> None:
        """DeleteGroups once the group is empty (`delete_group`)."""
        raise NotImplementedError

    def step(self, faults: bool) -> str:
        """One random action: the machine's own on a random client, time passing, or a server
        fault; returns its name."""
        actions = self.actions(faults)
        if faults:
            actions = [*actions, *self.SERVER_FAULTS]
        action = self.rng.choices([a for a, _ in actions], [w for _, w in actions])[0]
        name = self.rng.choice(self.NAMES)
        by_name: dict[str, Callable[[str], None]] = {
            "leave": self.leave,
            "crash_client": self.crash,
            "lose": self.lose,
            "duplicate": self.retry,
        }
        if action == "advance":
            self.advance(self.rng.choice([10, 60, 500, 1500, 2100, 3500]))
        elif action == "admin":
            self.admin_reads()
        elif action == "delete_group":
            self.delete_group()
        elif action in by_name:
            by_name[action](name)
        elif not self.act_on(action, name):
            self.server_fault(action)
        self.loop.step(quiet=not faults)
        self._drain()
        self._note(action)
        return action

    # The server's faults (besides a machine's own), with their weights in a step's draw.
    SERVER_FAULTS: ClassVar[list[tuple[str, float]]] = [
        ("clock_jump", 0.7),
        ("fail_append", 2),
        ("fail_fsync", 1),
        ("stall_fsync", 3),
        ("crash_server", 1.2),
    ]

    def server_fault(self, action: str) -> None:
        """One of `SERVER_FAULTS`: a clock jump (8 s, 30 s or 2 min: sessions expire together),
        the next 1-3 appends refused (EIO), the next fsync failing (the shard reloads), the next
        fsync stalled 1-6 steps, or a server crash (half of them power losses)."""
        rng = self.rng
        if action == "clock_jump":
            self.advance(rng.choice([8_000, 30_000, 120_000]))
        elif action == "fail_append":
            self.disk.fail_appends = rng.randint(1, 3)
        elif action == "fail_fsync":
            self.disk.fail_fsync = True
        elif action == "stall_fsync":
            self.disk.stall_steps = rng.randint(1, 6)
        elif action == "crash_server":
            self.crash_server(rng.random() < 0.5)
        else:
            raise AssertionError(f"unknown action {action}")

    def quiet(self) -> None:
        """Faults stop: stalled fsyncs complete, nothing fails any more."""
        self.disk.quiet = True
        self.disk.fail_appends, self.disk.fail_fsync, self.disk.stall_steps = 0, False, 0
        self.loop.step(quiet=True)
        self._drain()

    # --- invariants ----------------------------------------------------------------------------

    def _comparable(self) -> bool:
        """A classic group is compared at rest and not behind a failed append (see `_on_event`):
        between its join and its leader's SyncGroup it holds a generation no record carries yet
        (Kafka writes GroupMetadata at the sync)."""
        cg = self.classic_group
        if cg is None:
            return True
        return not self.classic_unsynced and cg.state in (ClassicGroupState.STABLE, ClassicGroupState.EMPTY)

    def check(self, full_replay: bool) -> None:
        """The invariants after a step: the machine's own (`check_clients`), replay equals live
        (the replica; with `full_replay`, a shard loaded from the disk), no event loop error."""
        self.check_clients()
        self.replica_equals_live()
        if full_replay:
            self.replay_from_disk_equals_live()
        assert not self.loop.errors, f"event loop errors: {self.loop.errors}"

    def check_clients(self) -> None:
        """The machine's own invariants (ownership in the coordinator and the clients, timers)."""
        raise NotImplementedError

    def replica_equals_live(self) -> None:
        if not self._comparable():
            return
        live = self.shard.persisted_state()["groups"].get(self.GROUP_ID)
        replayed = self.replica.persisted_state()["groups"].get(self.GROUP_ID)
        assert live == replayed, f"the journaled records replay to another group:\n{replayed}\nlive:\n{live}"

    def replay_from_disk_equals_live(self) -> None:
        if not self._comparable():
            return
        fresh = Shard(self.coordinator_config(), SeededIds(0), self.image, migration=Migration)
        load_shard(SimLog(self.disk), fresh, "sim")  # type: ignore[arg-type]
        live = self.shard.persisted_state()["groups"].get(self.GROUP_ID)
        assert fresh.persisted_state()["groups"].get(self.GROUP_ID) == live, (
            "the log replays to another group"
        )


def _consume(f: asyncio.Future[Any]) -> None:
    if not f.cancelled():
        f.exception()

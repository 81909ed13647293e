"""Soak: many KIP-848 members heartbeating for a long time, members coming and going.

`python -m bench.soak --minutes 30 [--members 10000] [--json]` starts a real `groupshift serve`
(pinned to one core), joins `members` consumer-protocol members, about `--group-size` a group,
over the wire (`setup_churned_groups`: see below), then for the whole run:

* every member heartbeats once per `group.consumer.heartbeat.interval.ms` (paced, not flat
  out), echoing a new assignment in its next heartbeat as a real client does, and rejoining
  with epoch 0 when fenced (KIP-848 `FENCED_MEMBER_EPOCH` / `UNKNOWN_MEMBER_ID`);
* every second `--churn` members go away (half leave with epoch -1, half just stop, so their
  session timer expires them) and as many new members join random groups;
* every `--sample-seconds` the gateway's RSS and its children's (the compaction worker; from
  /proc), its scheduled coordinator timers, the coordinator log size on disk and the
  compactions so far (from the metrics endpoint) are sampled.

Where the members start (`setup_churned_groups`): each in a group drawn at random (seeded),
not exactly `--group-size` in each as the heartbeat benchmarks place them
(`setup_consumer_groups`, kept there: equal groups make their figures comparable). The churn
takes one of the 64 longest-standing members (`_any`: nearly first in, first out, a lifetime of
members/churn seconds each) and puts a new one in a random group, so the group sizes it keeps
are those of members dropped into groups at random (binomial, about ±10 for 100 per group).
Two initial conditions made the heap grow over the first member lifetime (~17 minutes of a
30-minute run at 10,000 members and 10 a second), which read as a leak in the RSS slope: equal
groups, which relaxed toward that spread (members of smaller groups holding two partitions,
epoch maps of two entries; docs/robustness.md, "On a quiet machine again"), and the setup's
members queued group by group, so that they left one group at a time, emptying each group in
turn while joins went to random groups. `drive` queues them in random order. Starting from the
churn's own distribution, what the slope measures is the server, not the load generator's
initial condition.

What remains of the first lifetime after both is the allocators' layout: the setup allocates
every member's objects together, densely; churned members' objects are scattered among pools
and chunks shared with short-lived request objects, so over the first lifetime pymalloc adds
arenas while the free space inside them grows (its allocated bytes flat) and glibc's bytes in use
creep up, then level off (docs/robustness.md, "The soak's leave order"). A server that has run
for a while is past that. So before the measured minutes `--turnover RATE` (default 50 a second)
replaces every set-up member once, then waits a session timeout and 15 s for the abandoned ones
to expire, without sampling (`turnover_s` in the result); `--turnover 0` measures from the setup.

What a healthy server shows: RSS flat after warm-up (slope near 0), timers tracking the member
count (one session timer per member, plus members being expired), the log bounded by
compaction (`coordinator.compaction.min.bytes`, lowered here so it triggers within the run).
`summarize` computes min/max/least-squares slope of each curve; the CI test
(`e2e/test_soak_mini.py`) runs 20 seconds of this and asserts bounds on them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.heartbeats import (
    CGH_TOPIC,
    _call_all,
    _cgh,
    _check,
    _Client,
    _clients,
    _create_topic,
    _join_consumer_members,
)
from e2e.harness import GatewayProcess

try:
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None  # type: ignore[assignment]

FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID = 110, 25
TAIL_S = 1200.0  # the RSS slope is also given over the run's last 20 minutes


def settings(heartbeat_ms: int, session_ms: int, compaction_min_bytes: int) -> list[str]:
    return [
        "metrics.listen=127.0.0.1:0",
        f"group.consumer.heartbeat.interval.ms={heartbeat_ms}",
        f"group.consumer.session.timeout.ms={session_ms}",
        f"group.consumer.min.session.timeout.ms={min(session_ms, 45000)}",
        f"group.consumer.min.heartbeat.interval.ms={min(heartbeat_ms, 5000)}",
        f"coordinator.compaction.min.bytes={compaction_min_bytes}",
        "group.initial.rebalance.delay.ms=0",
    ]


@dataclass
class Member:
    group: str
    member_id: str
    epoch: int
    owned: list[dict[str, Any]] | None = None  # an assignment to echo in the next heartbeat
    due: float = 0.0
    busy: bool = False
    # When its last heartbeat answered without error was sent (monotonic): the gateway handled it
    # later, so a gap from there to a fencing answer that is under the session timeout means the
    # gateway fenced a member whose session had not expired.
    last_ok: float = 0.0
    leaving: bool = False  # chosen to leave with epoch -1


@dataclass
class Sample:
    t: float
    rss_mb: float
    timers: int
    log_bytes: int
    compactions: int
    members: int
    heartbeats_per_s: float
    py_blocks: int = -1  # the interpreter's live allocated blocks (groupshift_python_allocated_blocks)
    children_rss_mb: float = 0.0  # the gateway's child processes (the compaction worker)


@dataclass
class SoakState:
    members: dict[str, Member] = field(default_factory=dict)
    heartbeats: int = 0
    joins: int = 0
    leaves: int = 0
    abandoned: int = 0
    rejoins: int = 0
    turnover_s: float = 0.0  # how long the unsampled turnover phase took (`drive`)
    errors: dict[int, int] = field(default_factory=dict)
    # Why members were answered UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH (see `_heartbeat`):
    # fenced while heartbeating, with the longest gap since the last answered heartbeat was sent
    # (a gap over the session timeout: the load generator fell behind, not the gateway).
    fenced: int = 0
    fenced_max_gap_s: float = 0.0
    fenced_gap_over_session: int = 0
    leaves_of_unknown: int = 0  # a leave answered UNKNOWN_MEMBER_ID
    leaves_of_expired: int = 0  # ... whose member's last answered heartbeat was sent a session ago
    after_own_leave: int = 0  # a heartbeat answered after its own member's leave overtook it
    session_ms: int = 45000
    failures: list[str] = field(default_factory=list)
    scrape_failures: list[str] = field(default_factory=list)


def random_group_sizes(members: int, groups: int, rng: random.Random) -> list[int]:
    """How many of `members` each group gets when each member goes to a group drawn at random:
    the group sizes the churn keeps (module docstring)."""
    sizes = [0] * groups
    for _ in range(members):
        sizes[rng.randrange(groups)] += 1
    return sizes


def group_names(groups: int) -> list[str]:
    return [f"bench-hb-{g}" for g in range(groups)]


async def setup_churned_groups(port: int, groups: int, members: int, seed: int) -> list[Any]:
    """Join `members` members, each in a group drawn at random (`random_group_sizes`), to a
    topic of members/groups partitions, and heartbeat them until reconciled; the steady
    ConsumerGroupHeartbeat requests, one per member (as `setup_consumer_groups`)."""
    sizes = random_group_sizes(members, groups, random.Random(f"soak-placement-{seed}"))
    ids = [
        (name, f"member-{g:02d}-{i:05d}-xxxxxxxx"[:22])
        for g, (name, size) in enumerate(zip(group_names(groups), sizes, strict=True))
        for i in range(size)
    ]
    clients = await _clients(port, 16)
    epochs = await _join_consumer_members(clients, ids)
    await _create_topic(port, CGH_TOPIC, members // groups)
    epochs = await _settle(clients, ids, epochs, 120)
    steady = [_cgh(g, m, e) for (g, m), e in zip(ids, epochs, strict=True)]
    for c in clients:
        assert c.transport is not None
        c.transport.close()
    return steady


async def _settle(
    clients: list[_Client], ids: list[tuple[str, str]], epochs: list[int], rounds: int
) -> list[int]:
    """Heartbeat every member until a round after the assignments went out answers none (all
    reconciled); the members' epochs. Not `settle_cgh_members`' rule (every member was sent an
    assignment): a group with more members than partitions leaves some with none to be sent."""
    sent = False
    for _ in range(rounds):
        answers = await _call_all(clients, (_cgh(g, m, e) for (g, m), e in zip(ids, epochs, strict=True)))
        _check(answers, "CGH heartbeats after the topic was created")
        epochs = [a.member_epoch for a in answers]
        fresh = any(a.assignment is not None for a in answers)
        if sent and not fresh:
            return epochs
        sent = sent or fresh
        if not fresh:
            await asyncio.sleep(0.25)
    raise RuntimeError("CGH members never settled on their assignments")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def children_rss_mb(pid: int) -> float:
    """RSS of `pid`'s direct children (the compaction worker runs in one), from /proc."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                total += rss_mb(int(entry))
        except (OSError, ValueError, IndexError, RuntimeError):
            continue  # gone meanwhile
    return total


_METRIC = re.compile(
    r"^(groupshift_coordinator_(?:timers|log_bytes|compactions)|groupshift_python_allocated_blocks)"
    r" ([0-9.e+]+)$",
    re.M,
)


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=30) as r:
        text = r.read().decode()
    return {m.group(1): float(m.group(2)) for m in _METRIC.finditer(text)}


def slope_per_hour(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs (seconds), per hour; 0 for fewer than two points."""
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    den = sum((x - mx) ** 2 for x in xs)
    return 0.0 if den == 0 else sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den * 3600


def summarize(samples: list[Sample], warmup_s: float) -> dict[str, Any]:
    """min/max/slope of each curve; the RSS slope only after `warmup_s` (allocator warm-up)."""
    steady = [s for s in samples if s.t >= warmup_s] or samples

    def curve(attr: str, pts: list[Sample]) -> dict[str, float]:
        pts = [s for s in pts if getattr(s, attr) >= 0] or pts  # -1: metrics not scraped then
        ys = [float(getattr(s, attr)) for s in pts]
        return {
            "min": round(min(ys), 2),
            "max": round(max(ys), 2),
            "first": round(ys[0], 2),
            "last": round(ys[-1], 2),
            "slope_per_hour": round(slope_per_hour([s.t for s in pts], ys), 2),
        }

    end = samples[-1].t if samples else 0.0
    tail = [s for s in samples if s.t >= end - min(TAIL_S, end * 2 / 3)] or samples
    return {
        "rss_mb": curve("rss_mb", samples),
        "rss_mb_after_warmup": curve("rss_mb", steady),
        "rss_mb_last_20_min": curve("rss_mb", tail),  # issue 27's measure (two thirds if shorter)
        "timers": curve("timers", samples),
        "timers_after_warmup": curve("timers", steady),
        "log_bytes": curve("log_bytes", samples),
        "py_blocks_after_warmup": curve("py_blocks", steady),
        "children_rss_mb_after_warmup": curve("children_rss_mb", steady),
        "members": curve("members", samples),
        "compactions": max((int(s.compactions) for s in samples), default=0),
    }


async def _heartbeat(client: _Client, m: Member, st: SoakState, topic: str, interval_s: float) -> None:
    fields: dict[str, Any] = {}
    if m.epoch == 0:
        fields = {"rebalance_timeout": 60000, "subscribed_topic_names": [topic], "topic_partitions": []}
    elif m.owned is not None:
        fields = {"topic_partitions": m.owned}
    sent = time.monotonic()
    try:
        answer = await client.call(_cgh(m.group, m.member_id, m.epoch, **fields))
    except ConnectionError as e:
        st.failures.append(str(e))
        return
    finally:
        m.busy = False
    st.heartbeats += 1
    now = time.monotonic()
    m.due = now + interval_s
    code = int(answer.error_code)
    if code:
        st.errors[code] = st.errors.get(code, 0) + 1
        if code in (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID):
            if m.leaving:  # our own leave overtook it (cannot happen since `_leave` waits)
                st.after_own_leave += 1
                return
            gap = now - m.last_ok if m.last_ok else 0.0
            st.fenced += 1
            st.fenced_max_gap_s = max(st.fenced_max_gap_s, gap)
            if gap * 1000 > st.session_ms:
                st.fenced_gap_over_session += 1
            m.epoch, m.owned = 0, None  # rejoin, as KIP-848 clients do
            st.rejoins += 1
        return
    m.last_ok = sent
    if m.owned is not None and m.epoch != 0:
        m.owned = None  # echoed
    m.epoch = int(answer.member_epoch)
    if answer.assignment is not None:
        m.owned = [
            {"topic_id": tp.topic_id, "partitions": list(tp.partitions)}
            for tp in answer.assignment.topic_partitions
        ]


async def _leave(client: _Client, m: Member, st: SoakState) -> None:
    """Leave with epoch -1 on the member's own connection, after its heartbeat in flight (if
    any) is answered, as a real client does. (Until 2026-11-28 the leave went out at once on a
    random connection and could overtake that heartbeat, whose answer was then
    UNKNOWN_MEMBER_ID: the load generator's own race, more frequent on a loaded machine.)"""
    while m.busy:
        await asyncio.sleep(0.01)
    try:
        answer = await client.call(_cgh(m.group, m.member_id, -1))
    except ConnectionError as e:
        st.failures.append(str(e))
        return
    if int(answer.error_code):
        st.errors[int(answer.error_code)] = st.errors.get(int(answer.error_code), 0) + 1
        if int(answer.error_code) == UNKNOWN_MEMBER_ID:
            st.leaves_of_unknown += 1
            if m.last_ok and (time.monotonic() - m.last_ok) * 1000 > st.session_ms:
                st.leaves_of_expired += 1  # its session expired while the leave was queued
    st.leaves += 1


async def drive(
    gw: GatewayProcess,
    *,
    steady: list[Any],
    groups: int,
    seconds: float,
    churn_per_s: float,
    interval_s: float,
    sample_s: float,
    connections: int,
    seed: int,
    progress: bool,
    session_ms: int = 45000,
    turnover_per_s: float = 0.0,
) -> tuple[SoakState, list[Sample]]:
    """Heartbeat and churn for `seconds`, sampling every `sample_s`. With `turnover_per_s` > 0,
    first replace every set-up member once at that rate and wait a session timeout and 15 s
    for the abandoned ones to expire, unsampled (the module docstring says why)."""
    rng = random.Random(seed)
    st = SoakState(session_ms=session_ms)
    now = time.monotonic()
    # The churn takes its leavers from the longest-standing members (`_any`), so the setup's
    # members are queued in random order: queued as set up, group by group, they left one group
    # at a time, which emptied each group in turn while joins went to random groups, and the
    # state took the first generation of members (~17 minutes) to relax from that.
    steady = list(steady)
    rng.shuffle(steady)
    for i, r in enumerate(steady):
        st.members[r.member_id] = Member(
            r.group_id, r.member_id, int(r.member_epoch), due=now + interval_s * i / len(steady)
        )
    clients = await _clients(gw.port, connections)
    tasks: set[asyncio.Task[None]] = set()

    def spawn(coro: Any) -> None:
        t = asyncio.ensure_future(coro)
        tasks.add(t)
        t.add_done_callback(tasks.discard)

    names = group_names(groups)  # a group the random placement left empty gets members too
    assert {m.group for m in st.members.values()} <= set(names)
    samples: list[Sample] = []
    started = time.monotonic()
    next_sample = started
    churn_credit = 0.0
    last_tick = started
    hb_at_last_sample = 0
    assert gw.metrics_url is not None
    turning = turnover_per_s > 0  # the unsampled turnover phase is on
    turned_at: float | None = None  # when the last set-up member was replaced
    while True:
        now = time.monotonic()
        if turning:
            if turned_at is None and st.joins >= len(steady):
                turned_at = now
            if turned_at is not None and now - turned_at >= session_ms / 1000 + 15:
                turning = False
                st.turnover_s = round(now - started, 1)
                started = next_sample = now
                hb_at_last_sample = st.heartbeats
        if not turning and now >= next_sample:
            try:
                m = await asyncio.to_thread(scrape, gw.metrics_url)
            except OSError as e:  # a saturated gateway answers its metrics late: a gap, not an end
                st.scrape_failures.append(f"t={now - started:.0f}s: {e!r}")
                m = {}
            elapsed = now - started
            rate = (st.heartbeats - hb_at_last_sample) / sample_s if samples else 0.0
            hb_at_last_sample = st.heartbeats
            samples.append(
                Sample(
                    t=round(elapsed, 1),
                    rss_mb=round(rss_mb(gw.proc.pid), 1),
                    timers=int(m.get("groupshift_coordinator_timers", -1)),
                    log_bytes=int(m.get("groupshift_coordinator_log_bytes", -1)),
                    compactions=int(m.get("groupshift_coordinator_compactions", -1)),
                    members=len(st.members),
                    heartbeats_per_s=round(rate),
                    py_blocks=int(m.get("groupshift_python_allocated_blocks", -1)),
                    children_rss_mb=round(children_rss_mb(gw.proc.pid), 1),
                )
            )
            if progress:
                print(json.dumps(samples[-1].__dict__), flush=True)
            next_sample += sample_s
            if elapsed >= seconds:
                break
        # churn: leave (half gracefully, half by going silent) and join as many new members
        churn_credit += (now - last_tick) * (turnover_per_s if turning and turned_at is None else churn_per_s)
        last_tick = now
        while churn_credit >= 1 and st.members:
            churn_credit -= 1
            victim = st.members.pop(rng.choice(list(st.members)) if len(st.members) < 64 else _any(st, rng))
            if rng.random() < 0.5:
                victim.leaving = True
                spawn(_leave(clients[hash(victim.member_id) % connections], victim, st))
            else:
                st.abandoned += 1  # its session timer expires it
            new = Member(rng.choice(names), str(uuid.uuid4()), 0, due=now)
            st.members[new.member_id] = new
            st.joins += 1
        for m_ in st.members.values():
            if not m_.busy and m_.due <= now:
                m_.busy = True
                m_.due = now + interval_s  # until answered
                spawn(_heartbeat(clients[hash(m_.member_id) % connections], m_, st, CGH_TOPIC, interval_s))
        if st.failures:
            break
        await asyncio.sleep(0.1)
    for t in list(tasks):
        await t
    for c in clients:
        if c.transport is not None:
            c.transport.close()
    return st, samples


def _any(st: SoakState, rng: random.Random) -> str:
    # a random key without materialising 10,000 keys every churn step
    it = iter(st.members)
    for _ in range(rng.randrange(min(len(st.members), 64))):
        next(it)
    return next(it)


def run(
    *,
    minutes: float,
    members: int,
    group_size: int,
    churn_per_s: float,
    heartbeat_ms: int,
    session_ms: int,
    compaction_min_bytes: int,
    sample_s: float,
    gateway_core: int | None,
    data_dir: Path | None = None,
    seed: int = 1,
    progress: bool = False,
    extra_settings: list[str] | None = None,
    turnover_per_s: float = 0.0,
) -> dict[str, Any]:
    groups = max(1, members // group_size)
    members = groups * group_size
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        base = data_dir or Path(tmp)
        gw = GatewayProcess.start(
            base / "data",
            sets=settings(heartbeat_ms, session_ms, compaction_min_bytes) + (extra_settings or []),
        )
        try:
            if gateway_core is not None:
                os.sched_setaffinity(gw.proc.pid, {gateway_core})
            runner = asyncio.Runner(loop_factory=uvloop.new_event_loop if uvloop else None)
            with runner:
                t0 = time.monotonic()
                steady = runner.run(setup_churned_groups(gw.port, groups, members, seed))
                setup_s = time.monotonic() - t0
                st, samples = runner.run(
                    drive(
                        gw,
                        steady=steady,
                        groups=groups,
                        seconds=minutes * 60,
                        churn_per_s=churn_per_s,
                        interval_s=heartbeat_ms / 1000,
                        sample_s=sample_s,
                        connections=8,
                        seed=seed,
                        progress=progress,
                        session_ms=session_ms,
                        turnover_per_s=turnover_per_s,
                    )
                )
            alive = gw.alive()
        finally:
            gw.stop()
    warmup = min(300.0, minutes * 60 / 4)
    return {
        "scenario": "soak",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "minutes": minutes,
        "members": members,
        "groups": groups,
        "churn_per_s": churn_per_s,
        "heartbeat_interval_ms": heartbeat_ms,
        "session_timeout_ms": session_ms,
        "compaction_min_bytes": compaction_min_bytes,
        "setup_s": round(setup_s, 1),
        "turnover_per_s": turnover_per_s,
        "turnover_s": st.turnover_s,
        "heartbeats": st.heartbeats,
        "joins": st.joins,
        "leaves": st.leaves,
        "abandoned": st.abandoned,
        "rejoins": st.rejoins,
        "errors": {str(k): v for k, v in sorted(st.errors.items())},
        "fenced": {
            "while_heartbeating": st.fenced,
            "gap_over_session_timeout": st.fenced_gap_over_session,
            "max_gap_s": round(st.fenced_max_gap_s, 1),
            "heartbeat_after_own_leave": st.after_own_leave,
            "leave_of_unknown_member": st.leaves_of_unknown,
            "leave_of_unknown_member_gap_over_session_timeout": st.leaves_of_expired,
        },
        "failures": st.failures[:5],
        "metrics_scrape_failures": st.scrape_failures[:10],
        "gateway_alive_at_end": alive,
        "warmup_s": warmup,
        "summary": summarize(samples, warmup),
        "samples": [s.__dict__ for s in samples],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--members", type=int, default=10000)
    p.add_argument("--group-size", type=int, default=100)
    p.add_argument("--churn", type=float, default=10.0, help="members leaving (and joining) per second")
    p.add_argument(
        "--turnover",
        type=float,
        default=50.0,
        help="before the measured minutes, replace every set-up member once at this many a second, "
        "unsampled (0: start measuring right after the setup)",
    )
    p.add_argument("--heartbeat-ms", type=int, default=5000)
    p.add_argument("--session-ms", type=int, default=45000)
    p.add_argument("--compaction-min-bytes", type=int, default=1 << 20)
    p.add_argument("--sample-seconds", type=float, default=10.0)
    p.add_argument("--gateway-core", type=int, default=1, help="CPU the gateway is pinned to (-1: none)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="extra gateway setting (repeatable)"
    )
    p.add_argument("--json", action="store_true")
    p.add_argument("--progress", action="store_true", help="print every sample as it is taken")
    a = p.parse_args(argv)
    result = run(
        minutes=a.minutes,
        members=a.members,
        group_size=a.group_size,
        churn_per_s=a.churn,
        heartbeat_ms=a.heartbeat_ms,
        session_ms=a.session_ms,
        compaction_min_bytes=a.compaction_min_bytes,
        sample_s=a.sample_seconds,
        gateway_core=None if a.gateway_core < 0 else a.gateway_core,
        seed=a.seed,
        progress=a.progress,
        extra_settings=a.set,
        turnover_per_s=a.turnover,
    )
    if a.json:
        print(json.dumps(result))
    else:
        s = result["summary"]
        print(f"soak {result['minutes']} min, {result['members']} members, churn {result['churn_per_s']}/s")
        print(f"  heartbeats {result['heartbeats']}, joins {result['joins']}, leaves {result['leaves']},")
        print(f"  abandoned {result['abandoned']}, rejoins {result['rejoins']}, errors {result['errors']}")
        print(f"  fenced: {result['fenced']}")
        for k in (
            "rss_mb",
            "rss_mb_after_warmup",
            "rss_mb_last_20_min",
            "py_blocks_after_warmup",
            "children_rss_mb_after_warmup",
            "timers",
            "log_bytes",
            "members",
        ):
            print(f"  {k}: {s[k]}")
        print(f"  compactions: {s['compactions']}")
    return 0 if not result["failures"] and result["gateway_alive_at_end"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""`--plot FILE.png` of `groupshift groups migration`: who owned which partition when.

One row per partition, wall-clock time on the x axis, one coloured bar per ownership span,
one colour per client (`client_colours`, the same in both modes below and in the client matrix's
report timelines, harness/matrix/report.py), solid for a consumer-protocol owner and hatched for
a classic one, so a rolling upgrade reads left to right as hatching giving way to solid bars, a
rollback the other way, and gaps show partitions nobody owned. Each conversion of the group
(KIP-848's online upgrade and downgrade) is a labelled vertical line. Drawn with matplotlib's
Agg backend (no display needed); matplotlib is imported only here.

Spans come from the polls of `--watch` (an owner seen at poll i is taken to own the partition
until poll i+1), or from the gateway's JSON event log (`--events`, see `ownership_from_events`):
`member.assignment_changed` events start and end spans, and `member.left` / `member.fenced` /
`member.removed` end the member's spans, and `member.joined` names the member's client.
Partition lists may be "topic-partition" strings (as the gateway logs them), a {topic:
[partitions]} mapping or {topic, partition} objects.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tools.event_log import MEMBER_ENDS, event_member, event_time, partition_names, read_event
from tools.groups.snapshot import Group


class Observation(Protocol):
    """What a plot needs of one poll (`tools.groups.migration.Observation`): when, and the group
    as it was then. A protocol, so that this module and the migration view do not import each
    other."""

    @property
    def at(self) -> float: ...

    @property
    def group(self) -> Group: ...


#: Tableau 10: distinguishable, and readable on white; a client's colour is its index in the
#: sorted clients of one drawing.
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f")
#: Classic-protocol owners are hatched: matplotlib's hatch and the SVG pattern of the matrix report.
CLASSIC_HATCH = "//"


def client_colours(clients: Iterable[str]) -> dict[str, str]:
    """One colour per client, by the client's place among the sorted clients, so the same
    clients get the same colours whichever source (polls, event log, a matrix cell) drew them."""
    return {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(sorted(set(clients)))}


@dataclass(frozen=True)
class Span:
    partition: str
    owner: str
    protocol: str | None
    start: float
    end: float
    # the owner's client id, which picks the colour; None: unknown. Not part of a span's
    # identity (who owned what when), so left out of comparisons.
    client: str | None = field(default=None, compare=False)

    @property
    def colour_key(self) -> str:
        return self.client if self.client is not None else self.owner


def ownership_from_observations(observations: Sequence[Observation]) -> list[Span]:
    if not observations:
        return []
    times = [o.at for o in observations]
    step = (times[-1] - times[0]) / max(1, len(times) - 1) or 1.0
    spans: list[Span] = []
    for i, obs in enumerate(observations):
        end = times[i + 1] if i + 1 < len(times) else times[i] + step
        for m in obs.group.members:
            label = f"{m.client_id} {m.member_id[-8:]}"
            for t, p in m.partitions:
                spans.append(Span(f"{t}-{p}", label, m.protocol, obs.at, end, m.client_id))
    return _merge(spans)


def _merge(spans: list[Span]) -> list[Span]:
    out: list[Span] = []
    last: dict[str, Span] = {}
    for s in sorted(spans, key=lambda s: (s.partition, s.start)):
        prev = last.get(s.partition)
        if prev is not None and prev.owner == s.owner and abs(prev.end - s.start) < 1e-6:
            merged = Span(prev.partition, prev.owner, prev.protocol, prev.start, s.end, prev.client)
            out[out.index(prev)] = merged
            last[s.partition] = merged
        else:
            out.append(s)
            last[s.partition] = s
    return out


def ownership_from_events(path: str | Path, group: str) -> list[Span]:
    """Spans from a JSON-lines event log; raises ValueError if it has no partition lists.

    A member owns its assigned partitions plus those pending revocation (it still holds them
    until it releases them). `member.assignment_changed` carries either the whole assignment
    (`assigned`, or `partitions`: a classic generation) or the change (`added`, `revoked`,
    and the full `pending_revocation`: a KIP-848 reconciliation)."""
    assigned: dict[str, set[str]] = {}
    pending: dict[str, set[str]] = {}
    owned: dict[str, set[str]] = {}
    protocols: dict[str, str | None] = {}
    clients: dict[str, str] = {}
    open_spans: dict[tuple[str, str], float] = {}  # (partition, member) -> start
    spans: list[Span] = []
    last_t = 0.0
    saw_partitions = False

    def settle(member: str, now_owned: set[str], t: float) -> None:
        before = owned.get(member, set())
        for p in before - now_owned:
            start = open_spans.pop((p, member), t)
            spans.append(Span(p, member, protocols.get(member), start, t, clients.get(member)))
        for p in now_owned - before:
            open_spans[(p, member)] = t
        owned[member] = now_owned

    for line in Path(path).read_text(errors="replace").splitlines():
        e = read_event(line)
        if e is None or e.get("group") != group:
            continue
        t = event_time(e)
        if t is None:
            continue
        last_t = max(last_t, t)
        member = event_member(e)
        name = e.get("event")
        if e.get("protocol"):
            protocols[member] = str(e["protocol"])
        if e.get("client_id"):
            clients[member] = str(e["client_id"])
        if name == "member.assignment_changed":
            full = partition_names(e.get("assigned", e.get("partitions")))
            added = partition_names(e.get("added"))
            if full is not None:
                assigned[member] = set(full)
                pending[member] = set(partition_names(e.get("pending_revocation")) or ())
            elif added is not None or "pending_revocation" in e:
                revoked = set(partition_names(e.get("revoked")) or ())
                assigned[member] = (assigned.get(member, set()) - revoked) | set(added or ())
                pending[member] = set(partition_names(e.get("pending_revocation")) or ())
            else:
                continue
            saw_partitions = True
            settle(member, assigned[member] | pending[member], t)
        elif name in MEMBER_ENDS:
            assigned.pop(member, None)
            pending.pop(member, None)
            settle(member, set(), t)
    if not saw_partitions:
        raise ValueError(
            f"{path}: no member.assignment_changed event of group {group!r} lists its partitions"
        )
    for (p, member), start in open_spans.items():
        end = max(last_t, start + 1.0)
        spans.append(Span(p, member, protocols.get(member), start, end, clients.get(member)))
    return spans


def plot_ownership(
    spans: Sequence[Span],
    path: str | Path,
    title: str,
    conversions: Sequence[tuple[float, str]] = (),
) -> None:
    """Draw `spans`; `conversions` are (epoch seconds, "classic -> consumer") marks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    partitions = sorted(
        {s.partition for s in spans}, key=lambda p: (p.rpartition("-")[0], int(p.rpartition("-")[2] or 0))
    )
    colour = client_colours(s.colour_key for s in spans)
    t0 = min([*(s.start for s in spans), *(t for t, _ in conversions)], default=0.0)
    fig, ax = plt.subplots(figsize=(10, max(2.5, 0.4 * len(partitions) + 1.5)))
    row = {p: i for i, p in enumerate(partitions)}
    for s in spans:
        ax.barh(
            row[s.partition],
            s.end - s.start,
            left=s.start - t0,
            height=0.7,
            color=colour[s.colour_key],
            hatch=CLASSIC_HATCH if s.protocol == "classic" else None,
            edgecolor="black",
            linewidth=0.4,
        )
    for at, label in conversions:
        ax.axvline(at - t0, color="black", linestyle="--", linewidth=1.0)
        ax.annotate(
            label,
            xy=(at - t0, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(3, -3),
            textcoords="offset points",
            va="top",
            fontsize="small",
            rotation=90,
        )
    ax.set_yticks(range(len(partitions)), partitions)
    ax.invert_yaxis()
    ax.xaxis.set_major_formatter(
        FuncFormatter(lambda x, _pos: time.strftime("%H:%M:%S", time.localtime(t0 + x)))
    )
    ax.set_xlabel(f"wall-clock time ({time.strftime('%Y-%m-%d %Z', time.localtime(t0))})")
    ax.set_title(title)
    handles = [Patch(facecolor=c, edgecolor="black", label=client) for client, c in colour.items()]
    handles += [Patch(facecolor="white", edgecolor="black", hatch=CLASSIC_HATCH, label="classic protocol")]
    handles += [Patch(facecolor="white", edgecolor="black", label="consumer protocol")]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    fig.tight_layout()
    fig.savefig(str(path), dpi=100)
    plt.close(fig)

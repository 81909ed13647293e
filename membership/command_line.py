"""What the example members' command lines share (`python -m membership`, `python -m
consumer_membership`, `python -m connect_worker`): one JSON line per event on stdout, flushed at
once so a test or an operator reads the member's progress as it happens; SIGTERM or SIGINT
closes the member (it leaves its group, so the others rebalance at once rather than after the
session timeout); a fatal membership error exits 1, and client properties that cannot be used
(TLS, SASL) exit 2 with the reason on stderr.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from membership.core import MembershipError
from membership.driver import ComputedEvent
from protocol.client_security import ClientSecurityError

Say = Callable[..., None]


def say(event: str, **fields: Any) -> None:
    """One event line of the client-side-assignor members' examples (`t`: the wall clock, ms)."""
    print(json.dumps({"event": event, "t": round(time.time(), 3), **fields}), flush=True)


def say_computed(name: str, c: ComputedEvent) -> None:
    """A computation the member served (its `Computed` event)."""
    say(
        "computed",
        name=name,
        group_epoch=c.group_epoch,
        error=c.error,
        installed=c.installed,
        message=c.message,
    )


async def run_until_signalled(
    start: Callable[[], asyncio.Task[None]],
    close: Callable[[], Awaitable[None]],
    *,
    fatal: type[MembershipError],
    name: str,
    joining: dict[str, Any],
    say: Say = say,
) -> int:
    """Start the member, say `joining`, and run until a signal (close it: exit 0) or until it
    stops on its own (a `fatal` error: exit 1)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    task = start()
    say("joining", name=name, **joining)
    stopper = loop.create_task(stop.wait())
    await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        exc = task.exception()
        if isinstance(exc, fatal):
            say("fatal", name=name, error=str(exc), code=exc.code)
            return 1
    await close()
    say("closed", name=name)
    return 0


def run_command(main: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run `main` on a new event loop; unusable client properties exit 2."""
    try:
        return asyncio.run(main())
    except ClientSecurityError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

"""A live classic -> consumer -> classic migration on `groupshift serve --workers 2`
(docs/workers.md), the default suite's representative of the migration suite on workers (the
whole suite runs on workers with GROUPSHIFT_E2E_WORKERS=2, opt-in).

The group lives on worker 1 while the clients bootstrap at worker 0 and produce and fetch there:
two kafka-python eager members form a classic group; a confluent-kafka KIP-848 member joins
(the group becomes a consumer group on worker 1); then it leaves (the group is classic again).
After each step the group is stable on worker 1 and evenly split and every acknowledged record
has been consumed; at the end the migration checkers of e2e/migration.py hold: no partition held
twice at once, every acknowledged record consumed, duplicates only in the at-least-once window,
commits never going back.
"""

from __future__ import annotations

import pytest

from e2e.conftest import Gateways
from e2e.migration import scenario

pytestmark = pytest.mark.e2e


def test_upgrade_and_downgrade_of_a_group_on_the_second_worker(gateways: Gateways) -> None:
    with scenario(gateways, "workers", workers=2) as sc:
        assert sc.gw.workers == 2
        cast = sc.cast
        cast.kafka_python("range")
        cast.kafka_python("range")
        sc.step("classic", "two kafka-python eager members")
        kip848 = cast.confluent("consumer")
        sc.step("consumer", f"{kip848.name} joined: the group converted on worker 1")
        kip848.stop()
        sc.step("classic", f"{kip848.name} left: the group is classic again")
        assert sc.conversions() == [("classic", "consumer"), ("consumer", "classic")]
        report = sc.finish()
        print(f"migration on two workers: {report}")
        assert report.handovers >= 4 and not cast.errors()

"""A rolling classic -> KIP-848 migration with every client on SASL_SSL (SCRAM-SHA-512): the
checkers of e2e/migration.py hold when the members (kafka-python, aiokafka and confluent-kafka
classic members sharing the eager `range` assignor, then confluent-kafka KIP-848 members), the
continuous producer and the observers all speak TLS and SASL to the gateway. Short: three classic
members replaced one at a time by KIP-848 members; the group converts once. The plaintext runs
are e2e/test_migration_rolling.py. About 10 s.
"""

from __future__ import annotations

import pytest

from e2e.conftest import Gateways
from e2e.migration import SECURED, Scenario, scenario

pytestmark = pytest.mark.e2e


def sasl_ssl_logins(sc: Scenario) -> float:
    """groupshift_sasl_authentications_total summed over the SASL_SSL listener's series."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in sc.gw.metrics().splitlines()
        if line.startswith("groupshift_sasl_authentications_total{") and 'listener="SASL_SSL"' in line
    )


def test_rolling_upgrade_on_sasl_ssl(gateways: Gateways) -> None:
    with scenario(gateways, "sec-roll", ["metrics.listen=127.0.0.1:0"], secured=True) as sc:
        assert SECURED[sc.gw.bootstrap].address != sc.gw.bootstrap
        cast = sc.cast
        classic = [
            cast.classic("kafka-python-range"),
            cast.classic("aiokafka-range"),
            cast.classic("confluent-range"),
        ]
        sc.step("classic", "three classic range members of three libraries")
        upgraded = []
        for i, old in enumerate(classic):
            upgraded.append(cast.confluent("consumer"))
            sc.step("consumer", f"upgrade {i + 1}/3: {upgraded[-1].name} joined")
            old.stop()
            sc.step("consumer", f"upgrade {i + 1}/3: {old.name} left")
        assert sc.conversions() == [("classic", "consumer")]
        report = sc.finish()
        print(f"SASL_SSL rolling upgrade: {report}")
        assert report.handovers >= 6
        # The producer, six members and the observers all logged in on the SASL_SSL listener.
        assert sasl_ssl_logins(sc) >= 8

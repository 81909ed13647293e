"""A mutual-TLS client whose certificate subject no `ssl.principal.mapping.rules` rule maps fails
authentication as in Kafka (the connection closes, nothing answered) and is an `auth.failed`
audit event, counted by listener and mechanism (gateway.audit)."""

from __future__ import annotations

from typing import Any

from structlog.testing import capture_logs

from gateway.audit import AuditLog
from gateway.metrics import MetricsRegistry
from gateway.tls import PrincipalMapper
from gateway.tls_connection import TlsKafkaConnection


class FakeSslObject:
    def getpeercert(self) -> dict[str, Any]:
        return {"subject": ((("organizationName", "Example"),), (("commonName", "mallory"),))}


class FakeTransport:
    closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {
            "ssl_object": FakeSslObject(),
            "peername": ("127.0.0.9", 5555),
            "sockname": ("127.0.0.1", 9094),
        }.get(name, default)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def test_an_unmapped_certificate_closes_the_connection_and_is_audited() -> None:
    metrics = MetricsRegistry()
    conn = TlsKafkaConnection(connection_id=1, on_frame=lambda *a: None, max_frame_bytes=1 << 20)
    conn.mapper = PrincipalMapper("RULE:^CN=(alice),O=Example$/$1/")  # no DEFAULT: mallory is unmapped
    conn.audit = AuditLog(metrics)
    conn.ctx.listener_name = "MTLS"
    transport = FakeTransport()
    with capture_logs() as logs:
        conn.connection_made(transport)  # type: ignore[arg-type]
    assert transport.closed
    (event,) = [e for e in logs if e["event"] == "auth.failed"]
    assert (event["mechanism"], event["client"], event["listener"]) == ("SSL", "127.0.0.9:5555", "MTLS")
    assert 'groupshift_auth_failures_total{listener="MTLS",mechanism="SSL"} 1' in metrics.render()

"""gateway.audit: every event is counted; the log line is rate-limited per principal and host."""

from __future__ import annotations

from structlog.testing import capture_logs

from gateway.audit import AuditLog
from gateway.metrics import MetricsRegistry
from gateway.registry import RequestContext


def ctx(principal: str = "User:mallory", host: str = "127.0.0.9") -> RequestContext:
    return RequestContext(
        connection_id=7, peer=(host, 5555), listener=("127.0.0.1", 9092), principal=principal
    )


def test_each_denial_is_counted_and_logged_once_per_interval() -> None:
    metrics = MetricsRegistry()
    audit = AuditLog(metrics, every_s=3600)
    with capture_logs() as logs:
        for _ in range(5):
            audit.acl_denied(
                ctx(), api="OffsetCommit", resource_type="GROUP", resource_name="g", operation="READ"
            )
        audit.acl_denied(
            ctx("User:bob"), api="OffsetCommit", resource_type="GROUP", resource_name="g", operation="READ"
        )
    events = [e for e in logs if e["event"] == "acl.denied"]
    assert [e["principal"] for e in events] == ["User:mallory", "User:bob"]
    assert events[0]["client"] == "127.0.0.9:5555" and events[0]["resource_name"] == "g"
    text = metrics.render()
    assert 'groupshift_acl_denials_total{api="OffsetCommit",operation="READ"} 6' in text


def test_auth_failures_are_counted_by_listener_and_mechanism() -> None:
    metrics = MetricsRegistry()
    audit = AuditLog(metrics, every_s=0)
    with capture_logs() as logs:
        audit.auth_failed(ctx(), mechanism="PLAIN", reason="Invalid username or password", principal="alice")
        audit.auth_failed(ctx(), mechanism="PLAIN", reason="Invalid username or password", principal="alice")
    assert [e["event"] for e in logs] == ["auth.failed", "auth.failed"]
    assert logs[1]["suppressed"] == 0 and logs[0]["mechanism"] == "PLAIN"
    text = metrics.render()
    assert 'groupshift_auth_failures_total{listener="PLAINTEXT",mechanism="PLAIN"} 2' in text

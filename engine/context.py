"""Who sent a request: the parts of Kafka's `RequestContext` the coordinator uses, and the
authenticated principal (Kafka's `KafkaPrincipal` string), which binds member ids to their creator
(`engine.binding`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class RequestContext:
    client_id: str = ""
    client_host: str = ""
    api_version: int = 0
    principal: str = "User:ANONYMOUS"
    topic_filter: Callable[[str], bool] | None = field(default=None, compare=False)
    """With an authorizer: the topics the client may DESCRIBE. A regex subscription resolved
    during this client's heartbeat keeps only those (Kafka 4.x resolves a regex with the
    context of the member whose heartbeat triggered the resolution)."""

    def with_version(self, api_version: int) -> RequestContext:
        return RequestContext(
            self.client_id, self.client_host, api_version, self.principal, self.topic_filter
        )

"""Who sent a request: the parts of Kafka's `RequestContext` the coordinator uses, and the
authenticated principal (Kafka's `KafkaPrincipal` string), which binds member ids to their creator
(`engine.binding`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RequestContext:
    client_id: str = ""
    client_host: str = ""
    api_version: int = 0
    principal: str = "User:ANONYMOUS"

    def with_version(self, api_version: int) -> RequestContext:
        return RequestContext(self.client_id, self.client_host, api_version, self.principal)

"""ConnectGroupHeartbeat (32002), ConnectGroupPrepareAssignment (32003) and
ConnectGroupInstallAssignment (32004): groupshift's extension APIs for Connect groups on the new
protocol (the Connect draft summarised in docs/connect-groups.md; Kafka never built it). Registered, and so
advertised by ApiVersions, only with `group.connect.enable`; flag off, the keys are unknown as
they are to Kafka.

The wire shapes are `protocol.connect_wire`'s and the engine takes them as they are (they carry
no Kafka type to translate); the rules are `engine.connect`'s. docs/connect-groups.md.
"""

from __future__ import annotations

from typing import Any

from gateway.groups.apis import GroupService, audited, engine_ctx
from gateway.registry import HandlerRegistry, RequestContext
from protocol import connect_wire as cw
from protocol.client_assignment_wire import EXTENSION_VERSION


def register(registry: HandlerRegistry, service: GroupService) -> None:
    if not service.config.connect_enable:
        return
    apis = ConnectApis(service)
    v = EXTENSION_VERSION
    registry.register(cw.CONNECT_HEARTBEAT_KEY, v, v, apis.heartbeat)
    registry.register(cw.CONNECT_PREPARE_KEY, v, v, apis.prepare_assignment)
    registry.register(cw.CONNECT_INSTALL_KEY, v, v, apis.install_assignment)


class ConnectApis:
    def __init__(self, service: GroupService) -> None:
        self.service = service

    def heartbeat(self, ctx: RequestContext, header: Any, req: cw.ConnectHeartbeatRequest) -> Any:
        ectx = engine_ctx(ctx, EXTENSION_VERSION)
        return self.service.runtime_for(req.group_id).run(
            audited(self.service, ctx, lambda shard, now: shard.connect_group_heartbeat(req, ectx, now))
        )

    def prepare_assignment(self, ctx: RequestContext, header: Any, req: cw.ConnectPrepareRequest) -> Any:
        principal = ctx.principal
        return self.service.runtime_for(req.group_id).run(
            audited(
                self.service, ctx, lambda shard, now: shard.connect_prepare_assignment(req, now, principal)
            )
        )

    def install_assignment(self, ctx: RequestContext, header: Any, req: cw.ConnectInstallRequest) -> Any:
        principal = ctx.principal
        return self.service.runtime_for(req.group_id).run(
            audited(
                self.service, ctx, lambda shard, now: shard.connect_install_assignment(req, now, principal)
            )
        )

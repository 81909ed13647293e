"""DescribeClientQuotas (key 48, v0-1): groupshift enforces no client quotas, so none exist.

Kafka's `kafka-configs.sh --describe --entity-type users` asks for a user's quotas and its SCRAM
credentials together (ConfigCommand's `describeClientQuotaAndUserScramCredentialConfigs`) and
fails on a node that does not serve this API. Every filter is answered with no entries, as a
Kafka cluster without quotas answers it. AlterClientQuotas is not served (docs/deviations.md).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from gateway.registry import HandlerRegistry, RequestContext
from protocol.codec import response_type_of
from protocol.entity_builder import build

API_KEY = 48


def describe_client_quotas(ctx: RequestContext, header: Any, request: Any) -> Any:
    return build(
        response_type_of(request),
        {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "entries": []},
    )


def register_client_quota_apis(registry: HandlerRegistry) -> None:
    registry.register(API_KEY, 0, 1, describe_client_quotas)

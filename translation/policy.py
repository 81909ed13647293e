"""`group.consumer.migration.policy` (Kafka `ConsumerGroupMigrationPolicy`, KIP-848 "Supporting Online
Consumer Group Upgrade") and the
structured event every refused conversion logs.

The policy governs only conversions of non-empty groups: empty groups convert whatever it says
(Kafka converts empty groups whatever the policy). Classic members may join a non-empty consumer
group unless the policy is `disabled` (Kafka 4.3 answers INCONSISTENT_GROUP_PROTOCOL then,
KAFKA-20640).
"""

from __future__ import annotations

from engine.config import CoordinatorConfig
from engine.operation import Operation


def upgrade_enabled(config: CoordinatorConfig) -> bool:
    return config.consumer_migration_policy in ("bidirectional", "upgrade")


def downgrade_enabled(config: CoordinatorConfig) -> bool:
    return config.consumer_migration_policy in ("bidirectional", "downgrade")


def refused(op: Operation, group_id: str, direction: str, reason: str, **fields: object) -> None:
    """Kafka answers a refused upgrade with a bare GROUP_ID_NOT_FOUND and logs nothing useful
    to the client; operators need to know why (migration pitfall #2)."""
    op.explain("group.conversion_refused", group=group_id, direction=direction, reason=reason, **fields)

"""Classic members inside consumer groups and conversions between group types (KIP-848
"Supporting Online Consumer Group Upgrade"; spec §5.3-5.7).

The engine hands every cross-protocol request here (`engine.hooks.MigrationHooks`)."""

from __future__ import annotations

from engine.hooks import RefuseMigration
from engine.shard import Shard


class Migration(RefuseMigration):
    def __init__(self, shard: Shard) -> None:
        self.shard = shard

"""A Kafka Connect worker SDK for connect groups on the new protocol (groupshift extension).

The Connect draft's worker side (docs/connect-groups.md, "Worker SDK"): `ConnectWorker` (asyncio,
on `membership.driver`) runs `ConnectWorkerCore` (sans-IO: ConnectGroupHeartbeat, revoke-before-
assign reconciliation, fencing and rejoin, PrepareAssignment / InstallAssignment) with a pluggable
`ConnectAssignor`; `IncrementalCooperativeAssignor` is Kafka Connect's incremental cooperative
assignment of connectors and tasks. `python -m connect_worker` is a runnable worker that logs
its assignment as JSON lines.
"""

from connect_worker.assignor import (
    ConnectAssignor,
    ConnectAssignorError,
    ConnectGroupState,
    ConnectorConfig,
    HeldWork,
    IncrementalCooperativeAssignor,
    TaskId,
    Work,
    WorkerAssignment,
    WorkerInfo,
)
from connect_worker.client import ConnectWorker, ConnectWorkerThread
from connect_worker.core import Computed, ConnectWorkerCore, ConnectWorkerError, Settings

__all__ = [
    "Computed",
    "ConnectAssignor",
    "ConnectAssignorError",
    "ConnectGroupState",
    "ConnectWorker",
    "ConnectWorkerCore",
    "ConnectWorkerError",
    "ConnectWorkerThread",
    "ConnectorConfig",
    "HeldWork",
    "IncrementalCooperativeAssignor",
    "Settings",
    "TaskId",
    "Work",
    "WorkerAssignment",
    "WorkerInfo",
]

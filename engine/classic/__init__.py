"""Classic ("generic") groups: JoinGroup / SyncGroup / Heartbeat / LeaveGroup, any protocol type."""

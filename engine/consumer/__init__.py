"""KIP-848 consumer groups: state, heartbeat, target assignment, reconciliation."""

"""The group layer of the gateway: sharded coordinators, their runtimes, and the group APIs."""

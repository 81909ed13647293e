"""Connect groups on the new protocol (groupshift extension; docs/connect-groups.md)."""

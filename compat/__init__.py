"""compat layer (see docs/architecture.md)."""

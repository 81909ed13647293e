"""gateway layer (see docs/architecture.md)."""

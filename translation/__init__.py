"""translation layer (see docs/architecture.md)."""

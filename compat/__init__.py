"""compat layer (see DESIGN.md)."""

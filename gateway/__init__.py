"""gateway layer (see DESIGN.md)."""

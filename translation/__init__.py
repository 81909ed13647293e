"""translation layer (see DESIGN.md)."""

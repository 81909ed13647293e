"""`groupshift check`: upgrade readiness and downgrade safety per group (issue 15)."""

"""`groupshift fleet`: migration readiness and rebalance health of a whole fleet, on Spark (issue 16)."""

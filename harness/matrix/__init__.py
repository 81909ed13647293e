"""`groupshift matrix`: the version-matrix e2e runner (issue 14). See runtime.py for the seam
between the runner and the places client processes run (local processes or containers)."""

"""`python -m harness.kafka_dist start|versions|fetch ...` (the same as `groupshift kafka ...`)."""

import sys

from harness.kafka_dist.commands import main

sys.exit(main())

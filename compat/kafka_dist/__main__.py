"""`python -m compat.kafka_dist start|versions|fetch ...` (the same as `groupshift kafka ...`)."""

import sys

from compat.kafka_dist.commands import main

sys.exit(main())

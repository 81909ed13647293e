"""The `groupshift` commands that belong to no single layer below: `serve` (gateway settings and
the group layer), `simulate` (engine, translation and the chaos simulator) and `records` (the
record codec, Kafka's partitionFor and the log transfer tools). They live here, in the top layer,
because each draws on several layers and argparse has no place in the layers themselves; the
commands that belong to one layer (`groups`, `check`, `fleet`, `kafka`, `matrix`) keep their
parser beside it. `groupshift.cli.COMMANDS` names every command and the module that parses it.
"""

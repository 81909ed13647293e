"""The simulator and its client models (`groupshift simulate`, the stateful tests, fleet synth).

Drives the real coordinator (engine/, translation/, and for chaos gateway/'s ShardRuntime and
CoordinatorStorage) with simulated clients on a virtual clock, so a scenario or a faulty run is a
pure function of its seed. It sits above every layer it drives: nothing in protocol/, records/,
engine/, translation/ or gateway/ imports it.

* `sim.scenarios`: KIP-848 members only, printed as the KIP's case studies draw them;
* `sim.migration_scenarios`: the online migration case study, rolling upgrade and downgrade;
* `sim.client_assignors`: a classic leader's range, round-robin and cooperative sticky
  assignors (also fleet synth's);
* `sim.migration_clients` / `sim.migration_world`: classic eager, classic cooperative and
  consumer-protocol clients sharing one group (the hypothesis machine's world);
* `sim.chaos`: that world served by the real shard runtime on a simulated loop and disk, with
  faults (docs/simulation.md);
* `sim.client_assignment_chaos`: the same with client-side assignors on, members computing
  through PrepareAssignment / InstallAssignment, and their faults.
"""

"""Test support shipped in the package, not part of what a user runs: :mod:`.faults` injects faults (a kill, a
signal, a NaN, a pause) into a training run at chosen updates, for the fault tests (``make faults``). It is reached
only through ``faults=inject`` (``sarnmt/conf/faults/inject.yaml``, off by default); it lives in the package
because the fault tests run the published commands, in their own processes."""

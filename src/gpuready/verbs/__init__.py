"""One module or package per verb: each wires its options to facts, workloads and the runner, and owns its judge."""

"""What the judge runs: one evaluation in the worker process, from the problem to the verdict."""

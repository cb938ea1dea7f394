"""Flag names: what the guards found. Torch-free, so the parent reads them without importing the worker.

REJECTING flags turn a result into `rejected` (it never counts as correct or fast); NOTING flags are
shown and become `incorrect` only under --strict. MEASUREMENT flags are about the measurement, not the
candidate: shown, never a verdict (`unverified_time` and `noisy_timing` keep the speedup out of trusted figures
and of "best solution", `throttled` not).
"""

# Rejecting flags.
MUTATED_INPUTS = "mutated_inputs"        # a forward call changed its input tensors, unlike the reference's
STALE_OUTPUT = "stale_output"            # an output inside the timing loop was wrong: memoised or skipped work
SLOWED_REFERENCE = "slowed_reference"    # the reference ran slower once the candidate was loaded than before
# Noting flags.
SWEEP_FAILED = "sweep_failed"            # wrong at some random configuration of the problem
CALLS_REFERENCE_OP = "calls_reference_op"  # ran an aten op that carries the reference's work
LOW_PRECISION = "low_precision"          # error against float64 truth >= 10x the float32 reference's
WEAK_CHECK = "weak_check"                # reference output nearly constant or nearly zero
LIBRARY_ONLY = "library_only"            # no kernel of its own did a meaningful share of the GPU work (a decoy?)

# Warnings about the measurement.
THROTTLED = "throttled"                  # the SM clock fell by more than 10% while timing: times are suspect
UNVERIFIED_TIME = "unverified_time"      # faster than the reference by less than the judge's clock can confirm
NOISY_TIMING = "noisy_timing"            # times spread too widely, or load hit one side only: a busy machine

REJECTING = (MUTATED_INPUTS, STALE_OUTPUT, SLOWED_REFERENCE)
NOTING = (SWEEP_FAILED, CALLS_REFERENCE_OP, LOW_PRECISION, WEAK_CHECK, LIBRARY_ONLY)
MEASUREMENT = (THROTTLED, UNVERIFIED_TIME, NOISY_TIMING)

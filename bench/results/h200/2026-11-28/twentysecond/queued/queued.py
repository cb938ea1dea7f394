"""Both queued-work fixtures against convt1d_long, as test_gpu's test runs them: status, speedup, flags, message."""
import sys
import tempfile
from pathlib import Path

from kbench.schedule.scheduler import run_pairs
from kbench.config import RunConfig

root = Path(sys.argv[1])
cache = Path(tempfile.mkdtemp(prefix="kb-queued-"))
config = RunConfig(device="cuda", cache_dir=cache, time_budget_s=2.0, sweep=0)
names = ["queued_after_reply.py", "queued_short_kernels_after_reply.py"]
results = run_pairs([(root / "tests/fixtures/cheats/problems/convt1d_long.py", root / "tests/fixtures/boundary/gpu" / n)
                     for n in names], config, devices=["cuda:0"])
for name, result in zip(names, results):
    print(f"RESULT {name}: {result.status} speedup={result.speedup} flags={result.flags}\n    {result.message}")

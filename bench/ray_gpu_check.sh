#!/usr/bin/env bash
# kbench sweep --executor ray on one machine with two GPUs and no internet, against a local sweep of the same
# solutions (solutions/ plus the GPU fixtures of bench/sweep_bench.py). Prints: the verdicts of both per pair,
# how many GPU evaluations overlapped in time and on which devices, `kbench report` of the Ray sweep, and Ray's
# overhead per evaluation (bench/ray_overhead.py). About 5 minutes, 8 at most (each step has a time limit).
#
# Ray comes from .raypkg/: ray.tar.xz (the site-packages content of a ray 2.60.0 cp312 wheel) and the wheels
# of its missing dependencies; nothing is downloaded.
# Usage, from the repository root: OUT=/some/dir bash bench/ray_gpu_check.sh      (outputs land in $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kbench-ray-out}
SITE=/tmp/site
CACHE=/tmp/kbench-ray-cache   # one build cache for both sweeps and the overhead bench
TREE=/tmp/kbench-ray-tree     # the problems and solutions both sweeps run, at the same paths for every Ray worker
rm -rf "$CACHE" && mkdir -p "$OUT" "$SITE"

tar xJf .raypkg/ray.tar.xz -C "$SITE"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .raypkg/*.whl
# Exported before `ray start`: the Ray workers inherit this environment (Ray and kbench importable, builds
# for the H200 only, no NVLink multicast).
source bench/landlock_site.sh && landlock_site "$PWD"  # the runners' confinement ($LANDLOCK_WHEELS)
export PYTHONPATH=$SITE:$PWD:$PWD/.device/site PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
RAY="python3 -m ray.scripts.scripts"   # no `ray` console script comes with the unpacked wheel

nvidia-smi --query-gpu=index,name,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import ray, torch; print('ray', ray.__version__, '| torch', torch.__version__)" | tee -a "$OUT/gpu.txt"

# One folder of problems and solutions, so that one `kbench sweep` pairs them all.
rm -rf "$TREE" && mkdir -p "$TREE/solutions/axpy" "$TREE/solutions/convt1d_small"
cp -r problems "$TREE/problems" && cp -r solutions/. "$TREE/solutions/"
cp tests/fixtures/problems/axpy.py tests/fixtures/cheats/problems/convt1d_small.py "$TREE/problems/"
C=tests/fixtures/cheats
cp $C/side_stream.py $C/thread_side.py $C/uninit_reuse.py $C/honest_two_streams.py "$TREE/solutions/axpy/"
cp $C/honest_cuda_kernel.py "$TREE/solutions/convt1d_small/"

# A small object store: results are a few kB, and /dev/shm may be small in a container.
$RAY start --head --num-gpus=2 --object-store-memory=1000000000 --include-dashboard=false --disable-usage-stats \
    > "$OUT/ray_start.txt" 2>&1
trap '$RAY stop --force > /dev/null 2>&1' EXIT

SWEEP=(sweep --problems "$TREE/problems" --solutions "$TREE/solutions" --cache-dir "$CACHE" --time-budget 2
       --sweep 4 --timeout 300)
echo "== Ray sweep (cold builds)"
time timeout 210 python3 -m kbench "${SWEEP[@]}" --executor ray --ray-address auto --out "$OUT/ray.csv" \
    > "$OUT/ray_sweep.txt" 2>&1
tail -3 "$OUT/ray_sweep.txt"
echo "== Local sweep on both GPUs (builds cached)"
time timeout 120 python3 -m kbench "${SWEEP[@]}" --gpus 2 --out "$OUT/local.csv" > "$OUT/local_sweep.txt" 2>&1
tail -3 "$OUT/local_sweep.txt"

echo "== Verdicts, and GPU evaluations running at once"
python3 - "$OUT/local.csv" "$OUT/ray.csv" <<'EOF' 2>&1 | tee "$OUT/compare.txt"
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, "bench")
from kbench.results import read_rows
from sweep_bench import max_concurrent

local, ray = ({row["solution"]: row for row in read_rows(Path(path))} for path in sys.argv[1:3])
print(f"{'solution':56} {'local':16} {'ray':16} equal")
for solution in sorted(local.keys() | ray.keys()):
    statuses = [rows[solution]["status"] if solution in rows else "-" for rows in (local, ray)]
    name = solution.split("/solutions/")[-1]
    print(f"{name:56} {statuses[0]:16} {statuses[1]:16} {statuses[0] == statuses[1]}")
equal = local.keys() == ray.keys() and all(local[solution]["status"] == ray[solution]["status"] for solution in local)
print(f"verdicts equal for every pair: {equal}")
for name, rows in (("local", local), ("ray", ray)):
    # GPU evaluations, as in sweep_bench.py: they checked outputs, or died or hung trying.
    evaluations = [row for row in rows.values()
                   if row["trials_total"] or row["status"] in ("runtime_error", "crashed", "timeout")]
    spans = [SimpleNamespace(time=row["time"], wall_s=float(row["wall_s"] or 0)) for row in evaluations]
    devices = sorted({row["device"] for row in evaluations})
    print(f"{name}: {len(evaluations)} GPU evaluations, at most {max_concurrent(spans)} at once, on {devices}")
EOF

echo "== kbench report of the Ray sweep"
python3 -m kbench report "$OUT/ray.csv" --format markdown 2>&1 | tee "$OUT/report.md"

echo "== Ray's overhead per evaluation"
timeout 120 python3 bench/ray_overhead.py --gpus 2 --ray-address auto --cache-dir "$CACHE" --pairs 6 --repeat 1 \
    --settle 1 2>&1 | grep -v "WARNING" | tee "$OUT/ray_overhead.txt"

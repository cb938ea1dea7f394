#!/usr/bin/env bash
# Everything kbench must show on a GPU machine, in one call (device time is scarce):
#   1. the GPU test suite (seeds reproduce their recorded verdicts, CUDA errors become verdicts);
#   2. `kbench eval` of the seeds and general solutions with the sweep on (the table for the notes);
#   3. every problem's reference at official size, strict float32 and PyTorch defaults.
# Usage: OUT=/some/dir bash bench/gpu_check.sh   (outputs land in $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0 KBENCH_CACHE_DIR=${KBENCH_CACHE_DIR:-/tmp/kbench-cache}
OUT=${OUT:-/tmp/kbench-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
python3 -m pytest -m gpu -q -p no:cacheprovider 2>&1 | tee "$OUT/pytest_gpu.txt"
python3 -m kbench eval solutions/convt1d/*.py solutions/convt1d.py solutions/convt1d_dilated/*.py \
    solutions/convt2d_asym/*.py --out "$OUT/eval.csv" 2>&1 | tee "$OUT/eval.txt"
python3 bench/reference_times.py --csv "$OUT/reference_times.csv" 2>&1 | tee "$OUT/reference_times.txt"
python3 bench/guard_overhead.py --csv "$OUT/guard_overhead.csv" 2>&1 | tee "$OUT/guard_overhead.txt"

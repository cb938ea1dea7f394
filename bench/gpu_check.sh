#!/usr/bin/env bash
# What kbench must show on a GPU machine, in as few calls as device time allows:
#   verdicts: the GPU test suite (seeds reproduce their recorded verdicts, GPU cheats are caught,
#             CUDA errors become verdicts), then `kbench eval` of the seeds and general solutions
#             with the sweep on (the table for the notes);
#   timing:   every problem's reference at official size (strict float32 and PyTorch defaults),
#             and the guards' overhead per evaluation.
#   cheats:   `kbench eval` of the adversarial fixtures that run on CUDA (the table for the notes);
#   sweep:    (several GPUs) bench/sweep_bench.py, then `kbench sweep` over solutions/ and its report.
# Usage: OUT=/some/dir bash bench/gpu_check.sh [verdicts|cheats|timing|sweep|all]   (outputs land in $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD:$PWD/.device/site PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0 KBENCH_CACHE_DIR=${KBENCH_CACHE_DIR:-/tmp/kbench-cache}
OUT=${OUT:-/tmp/kbench-out}
part=${1:-all}
mkdir -p "$OUT"
source bench/landlock_site.sh && landlock_site "$PWD"  # the runners' confinement ($LANDLOCK_WHEELS)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv | tee -a "$OUT/gpu.txt"
if [[ $part == verdicts || $part == all ]]; then
    python3 -m pytest -m gpu -q -p no:cacheprovider 2>&1 | tee "$OUT/pytest_gpu.txt"
    python3 -m kbench eval solutions/convt1d/*.py solutions/convt1d.py solutions/convt1d_dilated/*.py \
        solutions/convt2d_asym/*.py --out "$OUT/eval.csv" 2>&1 | tee "$OUT/eval.txt"
fi
if [[ $part == cheats || $part == all ]]; then
    C=tests/fixtures/cheats
    python3 -m kbench eval --sweep 0 --time-budget 2 --problem tests/fixtures/problems/axpy.py $C/memo_pointer.py \
        $C/memo_call_count.py $C/default_dtype.py $C/patch_sync.py $C/patch_compare.py $C/lazy_subclass.py \
        $C/input_scribble.py $C/side_stream.py $C/thread_side.py $C/uninit_reuse.py $C/honest_two_streams.py \
        --out "$OUT/cheats.csv" 2>&1 | tee "$OUT/cheats.txt"
    python3 -m kbench eval --sweep 0 --time-budget 2 --problem $C/problems/convt1d_small.py $C/skip_after_warmup.py \
        $C/tf32_flip.py $C/library_op.py $C/low_precision.py $C/honest_cuda_kernel.py \
        --out "$OUT/cheats.csv" 2>&1 | tee -a "$OUT/cheats.txt"
    python3 -m kbench eval --sweep 0 --time-budget 2 --problem $C/problems/near_constant.py $C/constant_answer.py \
        --out "$OUT/cheats.csv" 2>&1 | tee -a "$OUT/cheats.txt"
fi
if [[ $part == timing || $part == all ]]; then
    python3 bench/reference_times.py --csv "$OUT/reference_times.csv" 2>&1 | tee "$OUT/reference_times.txt"
    python3 bench/guard_overhead.py --csv "$OUT/guard_overhead.csv" 2>&1 | tee "$OUT/guard_overhead.txt"
fi
if [[ $part == sweep ]]; then
    # On a machine with several GPUs: scheduler efficiency, verdicts with N GPUs vs 1, and a full sweep.
    python3 bench/sweep_bench.py --cache-dir "$KBENCH_CACHE_DIR" --csv "$OUT/sweep_bench.csv" 2>&1 | tee "$OUT/sweep_bench.txt"
    python3 -m kbench sweep --out "$OUT/sweep.csv" > "$OUT/sweep.txt" 2>&1
    python3 -m kbench report "$OUT/sweep.csv" --format markdown --plot "$OUT/speedups.png" > "$OUT/report.md" 2>&1
fi

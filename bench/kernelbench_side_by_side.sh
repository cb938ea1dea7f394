#!/usr/bin/env bash
# On a GPU machine, in one call (issue 26): KernelBench's own evaluator and kbench on the same N files of a
# KernelBench run folder, both from cold builds and on one GPU (device 0); prints both wall times and whether
# their verdicts agree. The caller fills the ignored folder .device/kb with KernelBench's problems, the run
# folders and KernelBench's evaluator (kb_build_one.py, kb_eval_one.py, its kernelbench package):
#     mkdir -p .device/kb && cp -r ../shared/kernelbench/level{1,2,3} ../shared/corpus/deepseek_v4_pro_l* .device/kb/
#     rm -rf .device/kb/evaluator && cp -r ../shared/kernelbench/evaluator .device/kb/evaluator
# and carries .device and .whl: the evaluator imports pydantic, which the GPU machine lacks and cannot download,
# so .whl holds pydantic and its four dependencies as cp312 manylinux wheels (the evaluator's README has the
# `pip download` line; one version of each).
# Usage: OUT=/some/dir [CODE=/a/tree/with/kbench] [KB_TIMEOUT=300] [KBENCH_ARGS=...] [SIDES=both] \
#            bash bench/kernelbench_side_by_side.sh [RUN [N]]
#   RUN: a run folder, relative to the repo root (default .device/kb/deepseek_v4_pro_l1); N (default 16): its
#   first N files in order of problem id that KernelBench compiled, as its eval_results.json says. CODE: the
#   kbench tree timed (default this one). KB_TIMEOUT: seconds per KernelBench process, build or eval. SIDES:
#   both (default), kbench or kernelbench: KernelBench's side took 8 to 10.5 minutes for 16 files on H100 and
#   H200 machines, so with a device call's 10-minute limit run the sides as two calls, on the same machine while
#   it is held (each side starts from empty build folders either way), and put both calls' outputs in one folder:
#   `python3 bench/kernelbench_side_by_side.py table FOLDER` reads both. KernelBench's side alone may outlast a
#   call too: KB_KEEP (a folder outside the repo, say /tmp/kb-keep, that the machine keeps while it is held) and
#   KB_DEADLINE (seconds, say 400: no eval starts after it) leave its GPU pass's rest to the next call with the
#   same KB_KEEP, which skips the build pass and the files done; each call copies what is done to $OUT.
# KernelBench runs as its scripts/eval_from_generations.py does: a CPU build pass, one process per file, as many
# at once as there are cores; then one fresh process per file on the GPU, one after another. A file whose
# process crashes or runs past KB_TIMEOUT still gets a row. kbench runs `kbench sweep` with a fresh cache
# folder. The verdicts agree when KernelBench's correctness equals kbench's status being `correct`; every
# disagreement must be explained in the write-up (KernelBench checks against references with TF32
# convolutions, at the official sizes only; kbench in true float32, over a random sweep of sizes, with guards):
# the table prints what each verdict rests on.
# Out, under $OUT: selected.txt (the files), kbench.csv and kbench.txt (its output), kbench_time.json,
# kernelbench.jsonl (one row per file: KBJSON fields, or why none), kernelbench/ (a log per process),
# kernelbench_times.json, device.txt, side_by_side.txt (the table). `python3 bench/kernelbench_side_by_side.py
# table $OUT` prints the table again from them.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CODE=$(cd "${CODE:-$ROOT}" && pwd) || exit 2
RUN=$(cd "${1:-$ROOT/.device/kb/deepseek_v4_pro_l1}" && pwd) || exit 2
N=${2:-16}
KB=$ROOT/.device/kb
OUT=${OUT:-/tmp/kbench-out}
WORK=$(mktemp -d /tmp/kb-side-by-side.XXXXXX)  # both sides' builds start here, empty: cold, as a first run is
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
helper() { PYTHONPATH=$ROOT python3 "$ROOT/bench/kernelbench_side_by_side.py" "$@"; }
mkdir -p "$OUT"

# pydantic for KernelBench's evaluator, in a folder of its own: only KernelBench's processes get it on PYTHONPATH
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$ROOT"/.whl/*.whl || exit 1
source "$ROOT/bench/landlock_site.sh" && landlock_site "$ROOT"  # kbench's runners' confinement ($LANDLOCK_WHEELS)
helper select "$RUN" "$N" > "$OUT/selected.txt" || exit 1
mkdir -p "$WORK/solutions" && xargs -d '\n' cp -t "$WORK/solutions" < "$OUT/selected.txt" || exit 1
# Loads torch once before either clock starts, so that neither pays for a cold page cache; names the GPU.
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))" \
    | tee "$OUT/device.txt"

# kbench first: the shorter side, so that its numbers come back even if KernelBench's run past the call's limit.
# `python -m` puts the working directory first on sys.path: run it in CODE. KBENCH_ARGS (default --gpus 1: device
# 0 alone, as KernelBench's side) adds to or replaces its options.
if [ "${SIDES:-both}" != kernelbench ]; then
rm -f "$OUT/kbench.csv"  # kbench appends: an earlier call's rows must not stand in for this one's
start=$(date +%s.%N)
(cd "$CODE" && KBENCH_CACHE_DIR=$WORK/kbench-cache PYTHONPATH=$CODE:$ROOT/.device/site python3 -m kbench sweep \
    --problems "$KB" --solutions "$WORK/solutions" --out "$OUT/kbench.csv" ${KBENCH_ARGS---gpus 1} \
    > "$OUT/kbench.txt" 2>&1)
status=$?
awk -v start="$start" -v end="$(date +%s.%N)" -v status=$status \
    'BEGIN { printf "{\"wall_s\": %.2f, \"exit\": %d}\n", end - start, status }' > "$OUT/kbench_time.json"
tail -3 "$OUT/kbench.txt"
fi

if [ "${SIDES:-both}" != kbench ]; then
    if [ -n "${KB_KEEP:-}" ]; then  # KernelBench's side in a folder that outlives the call: see KB_DEADLINE
        mkdir -p "$KB_KEEP/out" && cp "$OUT/selected.txt" "$KB_KEEP/out/" && KB_OUT=$KB_KEEP/out KB_WORK=$KB_KEEP/work
    else
        KB_OUT=$OUT KB_WORK=$WORK/kernelbench
    fi
    helper kernelbench "$KB_OUT" --evaluator "$KB/evaluator" --problems "$KB" --site /tmp/site --work "$KB_WORK" \
        --timeout "${KB_TIMEOUT:-300}" ${KB_DEADLINE:+--deadline "$KB_DEADLINE"}
    [ "$KB_OUT" = "$OUT" ] || cp -r "$KB_OUT"/kernelbench* "$OUT/"
fi
helper table "$OUT" | tee "$OUT/side_by_side.txt"
rm -rf "$WORK"

#!/usr/bin/env bash
# On a GPU machine, in one call (the build cache does not outlive it): kbench before the judge/runner split
# and after it, on the same solutions, each tree with a warm build cache of its own, then bench/split_cost.py's
# table. The tree before the split is unpacked by the caller under .device/before:
#     git archive 5f7dc5a kbench | tar -x -C .device/before
# Usage: OUT=/some/dir [AFTER=/a/tree/with/kbench] [BEFORE=/another] bash bench/split_check.sh [SWEEP OPTION...]
#   AFTER: default this tree; BEFORE: default .device/before (any two trees compare: git archive REV kbench);
#   SWEEP OPTIONs go to every sweep (--filter 'convt3d*' for a shorter run).
# Both trees' cold builds of the whole of solutions/ (about 60 builds) took about 8 minutes on 16 cores: more than
# one device call leaves for the sweeps. Split the solutions with --filter across calls, or run the two sweeps
# again in a later call on the same machine, still held: the caches under /tmp are still there.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0
CACHE=${KBENCH_CACHE_DIR:-/tmp/kbench-split-cache}
OUT=${OUT:-/tmp/kbench-out}
mkdir -p "$OUT"
source bench/landlock_site.sh && landlock_site "$ROOT"  # both trees' runners' confinement ($LANDLOCK_WHEELS)
# sweep CODE_DIR CSV [OPTION...]: `python -m` puts the working directory first on sys.path: run in CODE_DIR. Each
# tree has a build cache of its own: the two build differently (compiler wrappers, precompiled headers), and
# ninja rebuilds an extension whose recorded commands changed, inside the timed sweep.
sweep() {
    local code=$1 csv=$2
    shift 2
    (cd "$code" && KBENCH_CACHE_DIR=$CACHE/$(basename "$code") PYTHONPATH=$code:$ROOT/.device/site \
        python3 -m kbench sweep --solutions "$ROOT/solutions" --problems "$ROOT/problems" --out "$csv" "$@" \
        > "$csv.txt" 2>&1)
    tail -3 "$csv.txt"
}
AFTER=${AFTER:-$ROOT}
BEFORE=${BEFORE:-$ROOT/.device/before}
WARM=(--sweep 0 --trials 1 --time-budget 0.1 "$@")  # builds every extension once, into the tree's own cache
sweep "$AFTER" "$OUT/warmup_after.csv" "${WARM[@]}" & sweep "$BEFORE" "$OUT/warmup_before.csv" "${WARM[@]}"; wait
sweep "$BEFORE" "$OUT/before.csv" "$@"
sweep "$AFTER" "$OUT/after.csv" "$@"
PYTHONPATH=$ROOT python3 bench/split_cost.py "$OUT/before.csv" "$OUT/after.csv" | tee "$OUT/split_cost.txt"

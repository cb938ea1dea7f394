#!/usr/bin/env bash
# On a GPU machine: kbench before the judge/runner split (the tree of commit $BEFORE, unpacked under
# .device/before by the caller: git archive $BEFORE kbench | tar -x -C .device/before) and after it, on the
# same solutions, one after the other with one warm build cache; then bench/split_cost.py's table.
# Usage: OUT=/some/dir bash bench/split_check.sh [before|after|all]   (before's CSV is kept in .devcache)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0 KBENCH_CACHE_DIR=${KBENCH_CACHE_DIR:-$PWD/.devcache}
OUT=${OUT:-/tmp/kbench-out}
mkdir -p "$OUT"
SITE=$PWD/.device/site
sweep() {  # sweep CODE_DIR CSV
    PYTHONPATH=$1:$SITE python3 -m kbench sweep --solutions solutions --problems problems --out "$2" > "$2.txt" 2>&1
    tail -5 "$2.txt"
}
part=${1:-all}
if [[ $part == before || $part == all ]]; then
    sweep .device/before "$OUT/warmup.csv"      # builds every extension once (both versions share the cache)
    sweep .device/before "$OUT/before.csv"
fi
if [[ $part == after || $part == all ]]; then
    sweep "$PWD" "$OUT/after.csv"
    [[ -f "$OUT/before.csv" ]] || cp .devcache/before.csv "$OUT/before.csv"
    PYTHONPATH=$PWD python3 bench/split_cost.py "$OUT/before.csv" "$OUT/after.csv" | tee "$OUT/split_cost.txt"
fi
[[ -f "$OUT/before.csv" ]] && cp "$OUT/before.csv" .devcache/before.csv

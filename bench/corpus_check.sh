#!/usr/bin/env bash
# On a GPU machine: sweep the development corpus's run folders against KernelBench's problems and compare with
# KernelBench's recorded verdicts. The caller copies them into an ignored folder carried with the call:
#     mkdir -p .device/kb && cp -r ../shared/kernelbench/level{1,2,3} ../shared/corpus/deepseek_v4_pro_l* .device/kb/
# Usage: OUT=/some/dir [LIMIT=SECONDS] [TIMEOUT=SECONDS] [EARLIER=DIR] bash bench/corpus_check.sh [l1 l2 l3]
#   (default: all three levels). LIMIT: seconds each level's sweep may run (a device call's limit would cut the
#   report too); TIMEOUT: each evaluation's (kbench's --timeout; its default, 900 s, lets one slow level-3 kernel
#   hold the GPU for a whole call); EARLIER: a carried folder with an earlier call's LEVEL.csv files: each sweep
#   goes on from its level's (--resume).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} KBENCH_CACHE_DIR=${KBENCH_CACHE_DIR:-/tmp/kbench-corpus-cache}
export PYTHONPATH=$ROOT:$ROOT/.device/site
source bench/landlock_site.sh && landlock_site "$ROOT"  # the runners' confinement ($LANDLOCK_WHEELS)
OUT=${OUT:-/tmp/kbench-out}
mkdir -p "$OUT"
for level in "${@:-l1 l2 l3}"; do
    for name in $level; do
        folder=$ROOT/.device/kb/deepseek_v4_pro_$name
        resume=()
        timeout_option=()
        [ -n "${TIMEOUT:-}" ] && timeout_option=(--timeout "$TIMEOUT")
        if [ -n "${EARLIER:-}" ] && [ -f "$EARLIER/$name.csv" ]; then
            cp "$EARLIER/$name.csv" "$OUT/$name.csv"
            resume=(--resume)
        fi
        timeout "${LIMIT:-0}" python3 -m kbench sweep --problems "$ROOT/.device/kb" --solutions "$folder" \
            --out "$OUT/$name.csv" "${resume[@]}" "${timeout_option[@]}" > "$OUT/$name.txt" 2>&1
        COLUMNS=120 python3 -m kbench report "$OUT/$name.csv" --kernelbench "$folder" > "$OUT/$name.report.txt" 2>&1
        tail -3 "$OUT/$name.report.txt"
        grep -h "judge's clock" "$KBENCH_CACHE_DIR"/logs/level_*.log > "$OUT/$name.clock.txt" 2>/dev/null
    done
done

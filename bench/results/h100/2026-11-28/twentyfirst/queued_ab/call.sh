# Next session, call A (~4 min), from main's working tree: mlp_block, main and the queued-gpu-work branch alternated
# eight times each (is the branch's 0.94-0.96 a shift or the test's known spread?). Refresh the branch copy first:
#   rm -rf .device/s20/branch && mkdir -p .device/s20/branch && git archive queued-gpu-work kbench | tar -x -C .device/s20/branch
export PATH=$PATH:/usr/local/cuda/bin TORCH_CUDA_ARCH_LIST=9.0 KBENCH_CACHE_DIR=/tmp/kbm
R=$PWD; P=$R/bench/workloads/problems/mlp_block.py; S=$R/bench/workloads/solutions/mlp_block.py
one() { (cd $1 && PYTHONPATH=$PWD python3 -m kbench eval --problem $P $S --json 2>/dev/null | python3 -c "
import json,sys; r=json.load(sys.stdin)[0]; print('$2', r['speedup'], r['ref_median_ms'], r['cand_median_ms'])"); }
for i in 1 2 3 4 5 6 7 8; do one $R main; one $R/.device/s20/branch branch; done | tee $OUT/mlp_ab.txt
python3 - $OUT/mlp_ab.txt <<'PY'
import sys, statistics
rows = [line.split() for line in open(sys.argv[1])]
for tree in ("main", "branch"):
    speedups = sorted(float(r[1]) for r in rows if r[0] == tree)
    print(tree, "median", round(statistics.median(speedups), 3), "range", speedups[0], speedups[-1])
PY
# The queued-work fixture against convt1d_long (one ~50 ms kernel): main should show a gain (about 1.4x, unflagged),
# the branch none.
B=$R/.device/s20/branch; P=$B/tests/fixtures/cheats/problems/convt1d_long.py; F=$B/tests/fixtures/boundary/gpu/queued_after_reply.py
for tree in $R $B; do (cd $tree && PYTHONPATH=$PWD timeout 240 python3 -m kbench eval --problem $P $F --json 2>/dev/null | python3 -c "
import json,sys; r=json.load(sys.stdin)[0]; print('$tree'[-6:], r['status'], r['speedup'], r['ref_median_ms'], r['ref_alone_median_ms'], r['cand_median_ms'], r['flags'], r['message'][-300:])"); done | tee $OUT/queued_long_problem.txt

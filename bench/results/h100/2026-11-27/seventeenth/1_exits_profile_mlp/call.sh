export PATH=$PATH:/usr/local/cuda/bin TORCH_CUDA_ARCH_LIST=9.0 PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export KBENCH_CACHE_DIR=/tmp/kbc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
S=$(date +%s)
# 1. build four problems' solutions (and a quick warm evaluation of each)
timeout 200 python3 -m kbench sweep --solutions solutions --problems problems --out /tmp/warm4.csv --filter gelu --filter softmax --filter matmul_square --filter cross_entropy --sweep 0 --trials 1 --time-budget 0.1 > $OUT/build4.txt 2>&1; tail -3 $OUT/build4.txt; echo "build $(( $(date +%s)-S )) s"
# 2. where one evaluation's time goes, per runner request and function
timeout 150 python3 bench/judge_profile.py problems/gelu.py solutions/gelu.py problems/softmax.py solutions/softmax.py problems/softmax.py .device/trivial/softmax.py problems/matmul_square.py solutions/matmul_square.py problems/cross_entropy.py solutions/cross_entropy/simple.py --device cuda:0 --top 60 > $OUT/profile.txt 2>&1; grep -E "^=== |^phases" $OUT/profile.txt; echo "profile $(( $(date +%s)-S )) s"
# 3. mlp_block on both sides, twice
for i in 1 2; do timeout 80 python3 bench/timing_fidelity.py --only mlp_block --skip-ncu --stability-runs 0 --out-dir /tmp/mlp$i > $OUT/mlp$i.txt 2>&1; grep '^mlp_block' $OUT/mlp$i.txt; done; echo "mlp $(( $(date +%s)-S )) s"
# 4. when killed runners exit, beside the judge's exit (temporary marks)
bash bench/results/h100/2026-11-27/sixteenth/not_run/call.sh; echo "all $(( $(date +%s)-S )) s"

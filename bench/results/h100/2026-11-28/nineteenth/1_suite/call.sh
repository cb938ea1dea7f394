# Eighteenth-run code on the GPU: solutions/ built cold, then one full sweep; compared with the seventeenth run's sweep (H100)
export PATH=$PATH:/usr/local/cuda/bin TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 KBENCH_CACHE_DIR=/tmp/kbs
ROOT=$PWD; S=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
git log --oneline -1 >> $OUT/gpu.txt
(PYTHONPATH=$ROOT timeout 300 python3 -m kbench sweep --solutions solutions --problems problems --out /tmp/cold.csv --sweep 0 --trials 1 --time-budget 0.1 > $OUT/cold.txt 2>&1); tail -1 $OUT/cold.txt; echo "builds $(( $(date +%s)-S )) s"
(PYTHONPATH=$ROOT timeout 240 python3 -m kbench sweep --solutions solutions --problems problems --out $OUT/suite.csv > $OUT/suite.txt 2>&1); tail -2 $OUT/suite.txt; echo "sweep $(( $(date +%s)-S )) s"
PYTHONPATH=$ROOT python3 bench/split_cost.py .device/s19/suite_17.csv $OUT/suite.csv > $OUT/suite_ab.txt 2>&1; tail -45 $OUT/suite_ab.txt
grep -h "judge's clock" $KBENCH_CACHE_DIR/logs/*.log > $OUT/clock.txt 2>/dev/null; wc -l $OUT/clock.txt

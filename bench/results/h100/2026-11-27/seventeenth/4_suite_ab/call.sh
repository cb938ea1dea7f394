# The whole suite: one warm sweep by main at the start of this session (.device/s18/main0), one by this tree, same machine, one build cache
export PATH=$PATH:/usr/local/cuda/bin TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
ROOT=$PWD; S=$(date +%s); export KBENCH_CACHE_DIR=/tmp/kbs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
(PYTHONPATH=$ROOT timeout 280 python3 -m kbench sweep --solutions solutions --problems problems --out /tmp/cold.csv --sweep 0 --trials 1 --time-budget 0.1 > /tmp/cold.txt 2>&1); tail -1 /tmp/cold.txt; echo "builds $(( $(date +%s)-S )) s"
sw() { (cd $1 && PYTHONPATH=$1 timeout 160 python3 -m kbench sweep --solutions $ROOT/solutions --problems $ROOT/problems --out $OUT/$2.csv > $OUT/$2.txt 2>&1); tail -1 $OUT/$2.txt; echo "$2 $(( $(date +%s)-S )) s"; }
sw $ROOT/.device/s18/main0 suite_main0
sw $ROOT suite_new
PYTHONPATH=$ROOT python3 bench/split_cost.py $OUT/suite_main0.csv $OUT/suite_new.csv > $OUT/suite_ab.txt 2>&1; grep -A40 "changed status" $OUT/suite_ab.txt

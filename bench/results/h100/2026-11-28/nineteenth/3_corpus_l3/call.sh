# Call 3: the corpus's level 3 (cut at 570 s: 21 results)
export PATH=$PATH:/usr/local/cuda/bin; OUT=$OUT timeout 570 bash bench/corpus_check.sh l3
# Call 4, the same machine and build cache, a new CSV (the first call's was not carried: it judged anew): 24 results in 290 s
export PATH=$PATH:/usr/local/cuda/bin PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0 KBENCH_CACHE_DIR=/tmp/kbench-corpus-cache
F=$PWD/.device/kb/deepseek_v4_pro_l3; PYTHONPATH=$PWD timeout 290 python3 -m kbench sweep --problems .device/kb --solutions $F --out /tmp/l3.csv --resume > $OUT/l3b.txt 2>&1
cp /tmp/l3.csv $OUT/; grep -h "judge's clock" $KBENCH_CACHE_DIR/logs/level_*.log > $OUT/l3.clock.txt

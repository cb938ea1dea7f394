# Call B (H200): a short evaluation's time, profiled as a sweep's judge runs it (forked, runners warm); the
# queued short kernels as CUDA graph replays, on this tree and with the wait switched off by hand.
export PATH=$PATH:/usr/local/cuda/bin TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:$PWD/.device/site
export KBENCH_CACHE_DIR=/tmp/kb-cache
S=$(date +%s)
timeout 200 python3 -m kbench sweep --solutions solutions --problems problems --out $OUT/warm.csv \
    --filter 'gelu*' --filter 'softmax*' --filter 'layernorm*' --filter 'matmul_skinny*' --filter 'sum*' \
    --sweep 0 --trials 1 --time-budget 0.1 > $OUT/warm.txt 2>&1 &
D=$PWD; rm -rf /tmp/broken && mkdir /tmp/broken && cp -r kbench tests problems /tmp/broken/
sed -i 's/if context.quiet_gpu is not None and not context.quiet_gpu.wait(context.findings):/if False:/' /tmp/broken/kbench/judge/timed_sides.py
grep -c "if False:" /tmp/broken/kbench/judge/timed_sides.py
wait; tail -2 $OUT/warm.txt; echo "built at $(( $(date +%s)-S )) s"
timeout 150 python3 bench/judge_profile.py problems/gelu.py solutions/gelu.py problems/softmax.py solutions/softmax.py \
    problems/layernorm.py solutions/layernorm.py problems/matmul_skinny.py solutions/matmul_skinny.py \
    problems/sum_reduction.py solutions/sum_reduction/simple.py --top 80 > $OUT/profile.txt 2>&1
echo "profiled at $(( $(date +%s)-S )) s"; grep -E "^===|^phases|fresh interp" $OUT/profile.txt
timeout 150 python3 .device/s22/queued.py $PWD > $OUT/queued_main.txt 2>&1
grep -A1 RESULT $OUT/queued_main.txt; echo "queued main at $(( $(date +%s)-S )) s"
(cd /tmp/broken && PYTHONPATH=/tmp/broken:$D/.device/site timeout 150 python3 $D/.device/s22/queued.py /tmp/broken > $OUT/queued_broken.txt 2>&1)
grep -A1 RESULT $OUT/queued_broken.txt; echo "all $(( $(date +%s)-S )) s"

export PATH=$PATH:/usr/local/cuda/bin TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:$PWD/.device/site
S=$(date +%s)
# 3. the queued-work fixtures on this tree, then on a copy with the wait switched off (cold builds each)
timeout 170 python3 .device/s22/queued.py $PWD > $OUT/queued_main.txt 2>&1
grep -A1 RESULT $OUT/queued_main.txt; echo "queued main at $(( $(date +%s)-S )) s"
rm -rf /tmp/broken && mkdir /tmp/broken && cp -r kbench tests problems /tmp/broken/
sed -i 's/if context.quiet_gpu is not None and not context.quiet_gpu.wait(context.findings):/if False:/' /tmp/broken/kbench/judge/timed_sides.py
grep -c "if False:" /tmp/broken/kbench/judge/timed_sides.py
D=$PWD; (cd /tmp/broken && PYTHONPATH=/tmp/broken:$D/.device/site timeout 170 python3 $D/.device/s22/queued.py /tmp/broken > $OUT/queued_broken.txt 2>&1)
grep -A1 RESULT $OUT/queued_broken.txt; echo "all $(( $(date +%s)-S )) s"

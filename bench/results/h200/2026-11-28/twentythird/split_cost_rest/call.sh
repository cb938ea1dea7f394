# Call 2 (H200): bench/cupti_teardown.py, then the split's cost on avgpool2d, conv2d, convt1d*, cross_entropy
# (this tree against 5f7dc5a, both trees' cold builds and sweeps in one call).
export PATH=$PATH:/usr/local/cuda/bin TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
S=$(date +%s)
PYTHONPATH=$PWD timeout 100 python3 bench/cupti_teardown.py 3 > $OUT/cupti_teardown.txt 2>&1
cat $OUT/cupti_teardown.txt | tail -15; echo "cupti at $(( $(date +%s)-S )) s"
OUT=$OUT timeout $(( 585 - ($(date +%s)-S) )) bash bench/split_check.sh --filter 'avgpool2d*' --filter 'conv2d*' \
    --filter 'convt1d*' --filter 'cross_entropy*'
echo "all $(( $(date +%s)-S )) s"
echo "fresh interpreter lines: $(grep -rh 'fresh interpreter' /tmp/kbench-split-cache/*/logs 2>/dev/null | wc -l)"

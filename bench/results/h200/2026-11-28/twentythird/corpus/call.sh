# Call 3 (H200): the corpus's level 2 on this tree (LIMIT'd; resumed in a later call with EARLIER=).
export PATH=$PATH:/usr/local/cuda/bin TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
S=$(date +%s)
OUT=$OUT LIMIT=${LIMIT:-550} TIMEOUT=${TIMEOUT:-150} bash bench/corpus_check.sh ${LEVEL:-l2}
echo "all $(( $(date +%s)-S )) s"
echo "fresh interpreter lines: $(grep -rh 'fresh interpreter' /tmp/kbench-corpus-cache/logs 2>/dev/null | wc -l)"
grep -c . $OUT/${LEVEL:-l2}.csv

# The split's cost on 14 more of solutions/ (matmul, softmax, sum, gelu, layernorm, gemm), main against 5f7dc5a.
export PATH=$PATH:/usr/local/cuda/bin TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
S=$(date +%s); git log --oneline -1 > $OUT/tree.txt
OUT=$OUT timeout 330 bash bench/split_check.sh --filter 'matmul*' --filter 'softmax*' --filter 'sum*' \
    --filter 'gelu*' --filter 'layernorm*' --filter 'gemm*'
echo "all $(( $(date +%s)-S )) s"
echo "fresh interpreter lines: $(grep -rh 'fresh interpreter' /tmp/kbench-split-cache/*/logs 2>/dev/null | wc -l)"

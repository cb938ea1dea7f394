# Call C (H200): the split's cost on the 14 short evaluations (matmul, softmax, sum, gelu, layernorm, gemm),
# this tree against 5f7dc5a (before the split); both trees' cold builds and sweeps in one call.
export PATH=$PATH:/usr/local/cuda/bin TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
S=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
OUT=$OUT timeout 440 bash bench/split_check.sh --filter 'matmul*' --filter 'softmax*' --filter 'sum*' \
    --filter 'gelu*' --filter 'layernorm*' --filter 'gemm*'
echo "all $(( $(date +%s)-S )) s"
echo "fresh interpreter lines: $(grep -rh 'fresh interpreter' /tmp/kbench-split-cache/*/logs 2>/dev/null | wc -l)"

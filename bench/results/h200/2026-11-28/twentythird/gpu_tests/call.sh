# Call 1 (H200): pytest -m gpu over the five GPU files on this tree.
export PATH=$PATH:/usr/local/cuda/bin TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:$PWD/.device/site
S=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt; nproc >> $OUT/gpu.txt
timeout 585 python3 -m pytest -m gpu -v -p no:cacheprovider -rf \
    tests/test_gpu.py tests/test_kernels.py tests/test_gpu_verdicts.py tests/test_reference_cheats.py \
    tests/test_light_header.py > $OUT/pytest_gpu.txt 2>&1
grep -E "FAILED|ERROR" $OUT/pytest_gpu.txt | head; tail -3 $OUT/pytest_gpu.txt; echo "all $(( $(date +%s)-S )) s"

# Call D (H200): the GPU tests on this tree, the files this run's changes touch first.
export PATH=$PATH:/usr/local/cuda/bin TORCH_CUDA_ARCH_LIST=9.0 PYTHONPATH=$PWD:$PWD/.device/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
S=$(date +%s)
timeout 560 python3 -m pytest -m gpu -v -p no:cacheprovider -rf tests/test_gpu.py tests/test_kernels.py \
    tests/test_gpu_verdicts.py tests/test_reference_cheats.py tests/test_light_header.py > $OUT/pytest_gpu.txt 2>&1
grep -E "FAILED|ERROR" $OUT/pytest_gpu.txt | head; tail -4 $OUT/pytest_gpu.txt; echo "all $(( $(date +%s)-S )) s"

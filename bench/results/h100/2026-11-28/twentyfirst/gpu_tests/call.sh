export PATH=$PATH:/usr/local/cuda/bin TORCH_CUDA_ARCH_LIST=9.0 PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
timeout 580 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_verdicts.py tests/test_kernels.py tests/test_gpu.py tests/test_reference_cheats.py tests/test_light_header.py > $OUT/pytest_gpu.txt 2>&1
tail -25 $OUT/pytest_gpu.txt

# A/B on one machine: main at the start of this session (.device/s18/main0) against this tree
export PATH=$PATH:/usr/local/cuda/bin TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
ROOT=$PWD; S=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
F="--filter gelu --filter softmax --filter layernorm --filter cross_entropy --filter sum_reduction --filter avgpool2d --filter matmul_square --filter matmul_skinny --filter convt1d --filter convt2d_asym --filter convt3d_square --filter gemm_bias_relu --filter conv2d"
sw() { local tree=$1 name=$2; (cd $tree && KBENCH_CACHE_DIR=/tmp/kbt PYTHONPATH=$tree timeout 150 python3 -m kbench sweep --solutions $ROOT/.device/trivial --problems $ROOT/problems --out $OUT/$name.csv $F > /tmp/$name.txt 2>&1); tail -1 /tmp/$name.txt; }
sw $ROOT warm0; rm -f $OUT/warm0.csv
for i in 1 2; do sw $ROOT/.device/s18/main0 base$i; sw $ROOT new$i; done
for i in 1 2; do PYTHONPATH=$ROOT python3 bench/split_cost.py $OUT/base$i.csv $OUT/new$i.csv > /tmp/ab$i.txt 2>&1; grep -A3 "without each" /tmp/ab$i.txt; grep -E "waiting|running the ref|outside" /tmp/ab$i.txt; done
cat /tmp/ab1.txt /tmp/ab2.txt > $OUT/ab.txt
echo "sweeps $(( $(date +%s)-S )) s"
W="--only mlp_block --only relu_medium --only softmax --skip-ncu --stability-runs 0"
for t in main0 new; do tree=$ROOT/.device/s18/main0; [ $t = new ] && tree=$ROOT
(cd $tree && PYTHONPATH=$tree timeout 150 python3 bench/timing_fidelity.py $W --out-dir /tmp/tf_$t > $OUT/tf_$t.txt 2>&1); echo "== $t"; grep -E "^(mlp_block|relu_medium|softmax) " $OUT/tf_$t.txt; done
echo "fidelity $(( $(date +%s)-S )) s"
PYTHONPATH=$ROOT timeout 120 python3 -m pytest -q -m gpu tests/ -k "reference_s_own_kernels" > $OUT/gpu_own.txt 2>&1; tail -2 $OUT/gpu_own.txt
echo "all $(( $(date +%s)-S )) s"

# Run with trace.patch, then warm_call.patch, applied to the tree (patch -p1 < each, from the repository root)
export PATH=$PATH:/usr/local/cuda/bin TORCH_CUDA_ARCH_LIST=9.0 PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p .device/trivial; for p in problems/*.py; do printf 'class ModelNew(Model):\n    pass\n' > .device/trivial/$(basename $p); done  # the stand-in candidates
export KBENCH_CACHE_DIR=/tmp/kbt
F="--filter gelu --filter softmax --filter layernorm --filter cross_entropy --filter sum_reduction --filter avgpool2d --filter matmul_square --filter matmul_skinny --filter convt1d --filter convt2d_asym --filter convt3d_square --filter gemm_bias_relu --filter conv2d"
sw() { timeout 150 python3 -m kbench sweep --solutions .device/trivial --problems problems --out $OUT/$1.csv $F > $OUT/$1.txt 2>&1; tail -1 $OUT/$1.txt; }
sw warm0; rm $OUT/warm0.csv
for i in 1 2; do
KBENCH_EXP_NOWARM=1 KBENCH_EXP_RELEASE=1 sw base$i
rm -f /dev/shm/kbtr.txt; KBENCH_TRACE=/dev/shm/kbtr.txt sw new$i; cp /dev/shm/kbtr.txt $OUT/trace$i.txt
done
for i in 1 2; do python3 bench/split_cost.py $OUT/base$i.csv $OUT/new$i.csv > $OUT/ab$i.txt 2>&1; grep -A30 "without each" $OUT/ab$i.txt; done
grep -v "^ " $OUT/new1.txt | grep -i "error\|rejected" | head

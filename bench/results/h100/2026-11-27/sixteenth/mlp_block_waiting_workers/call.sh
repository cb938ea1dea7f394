export PATH=$PATH:/usr/local/cuda/bin TORCH_CUDA_ARCH_LIST=9.0 PYTHONPATH=$PWD PYTHONUNBUFFERED=1
sed -i 's/    WAITING_PER_DEVICE = 3/    WAITING_PER_DEVICE = int(os.environ.get("KBW", "3"))/' kbench/schedule/pool.py
grep -n "WAITING_PER_DEVICE =" kbench/schedule/pool.py
for i in 1 2; do for w in 3 0; do
KBW=$w timeout 70 python3 bench/timing_fidelity.py --only mlp_block --skip-ncu --stability-runs 0 --out-dir /tmp/w$w$i > $OUT/w${w}_$i.txt 2>&1
echo "waiting=$w run $i: $(grep '^mlp_block' $OUT/w${w}_$i.txt | tail -1)"
done; done

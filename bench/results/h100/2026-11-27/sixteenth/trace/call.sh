# Run with trace.patch applied to the tree: patch -p1 < bench/results/h100/2026-11-27/sixteenth/trace/trace.patch
export PATH=$PATH:/usr/local/cuda/bin TORCH_CUDA_ARCH_LIST=9.0 PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p .device/trivial; for p in problems/*.py; do printf 'class ModelNew(Model):\n    pass\n' > .device/trivial/$(basename $p); done  # the stand-in candidates
export KBENCH_CACHE_DIR=/tmp/kbt
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
timeout 200 python3 -m kbench sweep --solutions .device/trivial --problems problems --out /tmp/warm0.csv > /tmp/warm0.txt 2>&1; tail -1 /tmp/warm0.txt
rm -f /dev/shm/kbtr.txt
KBENCH_TRACE=/dev/shm/kbtr.txt timeout 200 python3 -m kbench sweep --solutions .device/trivial --problems problems --out $OUT/trace.csv > $OUT/trace_sweep.txt 2>&1; tail -1 $OUT/trace_sweep.txt
cp /dev/shm/kbtr.txt $OUT/trace.txt
python3 - <<'PY' > $OUT/trace_sorted.txt
l=[x.split(None,2) for x in open('/dev/shm/kbtr.txt')]; l.sort(key=lambda x: float(x[0])); t0=float(l[0][0])
for t,p,s in l: print(f'{float(t)-t0:8.3f} {p} {s.strip()}')
PY
head -150 $OUT/trace_sorted.txt | tail -100

#!/usr/bin/env bash
# Issue 12's MFU targets on one GPU: each configuration through benchmarks/reference_train_loop.py (plain PyTorch,
# none of gpuready's code) and through `gpuready bench --ranks 1`, same GPU, same settings, one after the other.
# Then the measurement overhead (benchmarks/bench_overhead.py) on a model whose step is tens of ms.
# Run from the repository root on a GPU machine: OUT=dir bash benchmarks/bench_vs_reference.sh
# Writes $OUT/reference.jsonl, $OUT/bench-<config>.json, $OUT/overhead.txt, $OUT/log.txt.
set -u
OUT=${OUT:-/tmp/bench-vs-reference}
mkdir -p "$OUT"
export PYTHONPATH=src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-5}
# name layers hidden heads precision micro-batch compile(0/1)
CONFIGS=${CONFIGS:-"760M 24 1536 16 bf16 4 0
1.3B 24 2048 16 amp-bf16 4 0
1.3B 24 2048 16 amp-bf16 8 1"}
echo "$CONFIGS" | while read -r name layers hidden heads precision micro compile; do
  label="$name-$precision-mb$micro$([ "$compile" = 1 ] && echo -compiled)"
  flag=$([ "$compile" = 1 ] && echo --compile)
  echo "== $label: reference loop" >>"$OUT/log.txt"
  python3 benchmarks/reference_train_loop.py --layers "$layers" --hidden "$hidden" --heads "$heads" --seq 2048 \
    --micro-batch "$micro" --precision "$precision" $flag --steps "$STEPS" --warmup "$WARMUP" \
    >>"$OUT/reference.jsonl" 2>>"$OUT/log.txt"
  echo "== $label: gpuready bench" >>"$OUT/log.txt"
  python3 -m gpuready bench --device cuda --ranks 1 --preset "$name" --seq 2048 --micro-batch "$micro" \
    --precision "$precision" $flag --steps "$STEPS" --warmup "$WARMUP" --json --out "$OUT/bench-$label.json" \
    >/dev/null 2>>"$OUT/log.txt"
  echo "   exit $?" >>"$OUT/log.txt"
done
python3 benchmarks/bench_overhead.py --device cuda --preset 125M --seq 1024 --micro-batch 8 --steps 40 \
  >>"$OUT/overhead.txt" 2>>"$OUT/log.txt"
python3 benchmarks/bench_overhead.py --device cuda --preset 350M --seq 2048 --micro-batch 4 --steps 40 \
  >>"$OUT/overhead.txt" 2>>"$OUT/log.txt"

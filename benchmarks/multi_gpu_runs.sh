#!/usr/bin/env bash
# Issue 13's gpuready side on a multi-GPU machine, in steps that fit one device call each (the reference tools,
# nvbandwidth and nccl-tests, are built and run beside it by hand: nothing fetched is committed).
# Run from the repository root: OUT=dir STEP=collect|validate|watchdog|burn|burn-kill|bench bash benchmarks/multi_gpu_runs.sh
# Each step writes at most two files under $OUT plus a line in $OUT/summary.txt.
set -u
OUT=${OUT:-/tmp/multi-gpu}
STEP=${STEP:-collect}
mkdir -p "$OUT"
export PYTHONPATH=src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gpus=$(nvidia-smi -L | grep -c '^GPU ')
say() { echo "[$STEP, $gpus GPUs] $*" | tee -a "$OUT/summary.txt"; }
workers_left() { pgrep -f 'gpuready.workloads.worker' | wc -l; }

case "$STEP" in
collect)  # the fixture bundle and the live verdict
  python3 -m gpuready collect --redact --tar --out "$OUT/h200-x$gpus-collect.tar.gz" 2>>"$OUT/log.txt"
  python3 -m gpuready check --json --out "$OUT/check.json" >/dev/null 2>>"$OUT/log.txt"
  say "collect exit and check exit $?" ;;
validate)  # P2P matrices and NCCL busbw, to hold against nvbandwidth and nccl-tests
  python3 -m gpuready validate --json --out "$OUT/validate.json" >/dev/null 2>>"$OUT/log.txt"
  say "validate exit $?" ;;
watchdog)  # one rank SIGSTOPped in a collective: named within --timeout + 1 s, exit 4, no process left
  started=$(python3 -c 'import time; print(time.time())')
  GPUREADY_FAULT=1:stop:collectives python3 -m gpuready validate --only collectives --timeout 20 --json \
    --out "$OUT/watchdog.json" >/dev/null 2>>"$OUT/log.txt"
  code=$?
  say "SIGSTOP of rank 1: exit $code after $(python3 -c "import time; print(round(time.time() - $started, 1))") s; workers left: $(workers_left)" ;;
burn)  # every GPU, per-GPU TFLOP/s, power, temperatures, straggler and checksum comparison on real peers
  python3 -m gpuready burn --duration 90s --json --out "$OUT/burn.json" >/dev/null 2>>"$OUT/log.txt"
  say "burn exit $?" ;;
burn-kill)  # one GPU's worker killed mid-run: the others go on and the report says so
  python3 -m gpuready burn --duration 60s --json --out "$OUT/burn-killed.json" >/dev/null 2>>"$OUT/log.txt" &
  burn=$!
  sleep 30
  victim=$(for pid in $(pgrep -f 'gpuready.workloads.worker'); do
             tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'RANK=1' && echo "$pid"; done | head -1)
  kill -9 "$victim"
  wait "$burn"
  say "burn with rank 1 (pid $victim) killed at 30 s: exit $?; workers left: $(workers_left)" ;;
bench)  # 1 -> N GPUs for the 1.3B preset with DDP and FSDP2
  python3 -m gpuready bench --preset 1.3B --json --out "$OUT/bench-1.3B.json" >/dev/null 2>>"$OUT/log.txt"
  say "bench exit $?" ;;
*) echo "STEP: collect|validate|watchdog|burn|burn-kill|bench" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# What validate and burn say when another process uses the GPU (issue 9), on a real GPU:
#   1. a foreign bf16 matmul loop on GPU 0 during `validate --quick` and a 30 s `burn`;
#   2. a foreign process holding most of GPU 0's memory (default 130 GiB) during a 20 s `burn`.
# Prints, per run, the verdict, exit code and the findings that name the other process.
# Run: bash benchmarks/shared_gpu.sh OUTDIR [GIB_HELD]   (needs a GPU; never changes clocks or limits)
set -u
out=${1:?output folder}; held_gib=${2:-130}
mkdir -p "$out"
summary() {  # the verdict and the sharing-related findings of one JSON report
  python3 - "$1" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
print("  verdict:", report.get("verdict"))
for finding in report.get("findings", []):
    if finding["check_id"].split(".")[-1] in ("gpu_shared", "throughput_low", "failed", "errors", "low") or finding["status"] != "pass":
        print(f"  {finding['status']:5} {finding['check_id']}: {finding['message'][:220]}")
PY
}
python3 - <<'PY' &
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.time() + 170
while time.time() < end:
    for _ in range(50):
        a @ a
    torch.cuda.synchronize()
PY
foreign=$!
sleep 15
python3 -m gpuready validate --quick --json --out "$out/validate-foreign-loop.json" > /dev/null; echo "validate, foreign matmul loop: exit $?"
summary "$out/validate-foreign-loop.json"
python3 -m gpuready burn --duration 30s --json --out "$out/burn-foreign-loop.json" > /dev/null; echo "burn 30 s, foreign matmul loop: exit $?"
summary "$out/burn-foreign-loop.json"
python3 -m gpuready burn --duration 10s --exclusive --json --out "$out/burn-exclusive.json" > /dev/null; echo "burn --exclusive, foreign matmul loop: exit $?"
summary "$out/burn-exclusive.json"
kill $foreign; wait $foreign 2>/dev/null
python3 - "$held_gib" <<'PY' &
import sys, time, torch
held = torch.empty(int(float(sys.argv[1]) * 2**30), dtype=torch.uint8, device="cuda")
time.sleep(120)
PY
holder=$!
sleep 20
python3 -m gpuready burn --duration 20s --json --out "$out/burn-memory-held.json" > /dev/null; echo "burn 20 s, ${held_gib} GiB held by another process: exit $?"
summary "$out/burn-memory-held.json"
kill $holder; wait $holder 2>/dev/null

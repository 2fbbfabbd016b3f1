#!/usr/bin/env bash
# Issue 23's figures from one run on one H200, each beside its plain reference:
#   part 1 (`bash benchmarks/issue23_h200.sh runs`; `validate`: only its first two items): validate --quick and default wall time (process start to exit)
#     with the duration each predicted, the pageable host->device figure beside a plain tensor.to("cuda") loop,
#     bench's training step beside benchmarks/reference_train_loop.py (tokens/s, peak memory), a short burn;
#   part 2 (`bash benchmarks/issue23_h200.sh memory`): plan's peak-memory estimate beside the plain loop
#     (benchmarks/plan_memory_vs_plain.py).
# Writes under $OUT (default /tmp/issue23). Never changes clocks, power limits or persistence.
set -u
OUT=${OUT:-/tmp/issue23}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${EXTRA_PATH:+:$EXTRA_PATH} NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
part=${1:-runs}
if [ "$part" = runs ] || [ "$part" = validate ]; then
  for run in quick-1 default-1 quick-2 default-2 quick-3; do
    tier=${run%-*}
    flag=$([ "$tier" = quick ] && echo --quick)
    /usr/bin/time -f "validate $run wall %e s" -a -o "$OUT/validate.time" \
      python3 -m gpuready validate $flag --out "$OUT/validate-$run.json" >"$OUT/validate-$run.txt" 2>&1
  done
  python3 - "$OUT" <<'PY' >"$OUT/validate-summary.txt"
import glob, json, re, sys
for path in sorted(glob.glob(sys.argv[1] + "/validate-*.json")):
    document = json.load(open(path))
    text = open(path[:-5] + ".txt").read()
    predicted = re.search(r"predicted about (\d+) s", text)
    print(path.rsplit("/", 1)[1], "predicted", predicted.group(1) if predicted else "?", "s;",
          document["facts"]["validate"].get("wall_s"), "s ranks;", document["facts"]["validate"].get("seconds"))
    print("   ", {m["name"]: round(m["value"], 2) for m in document["measurements"]})
PY
  python3 benchmarks/pageable_h2d.py --repeats ${PAGEABLE_REPEATS:-12} >"$OUT/pageable_h2d.txt" 2>&1
fi
if [ "$part" = runs ]; then
  for config in "760M 24 1536 16 bf16 4" "350M 24 1024 16 amp-bf16 8"; do
    set -- $config
    python3 benchmarks/reference_train_loop.py --layers "$2" --hidden "$3" --heads "$4" --seq 2048 \
      --micro-batch "$6" --precision "$5" --steps 20 --warmup 5 >>"$OUT/reference.jsonl" 2>>"$OUT/log.txt"
    python3 -m gpuready bench --device cuda --ranks 1 --preset "$1" --seq 2048 --micro-batch "$6" \
      --precision "$5" --steps 20 --warmup 5 --json --out "$OUT/bench-$1-$5.json" >/dev/null 2>>"$OUT/log.txt"
  done
  python3 -m gpuready burn --duration 20s --json --out "$OUT/burn-20s.json" >/dev/null 2>>"$OUT/log.txt"
fi
if [ "$part" = memory ]; then
  python3 benchmarks/plan_memory_vs_plain.py --configs "${CONFIGS:-heldout}" --out "$OUT/plan_vs_plain.json" --budget-s 400 >"$OUT/plan_vs_plain.txt" 2>&1
fi

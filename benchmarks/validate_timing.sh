#!/usr/bin/env bash
# Wall time of `validate` tiers (targets: --quick <= 60 s on one H200; --device cpu --ranks 2 --quick <= 60 s on 2 cores),
# and how fast the watchdog ends a run whose rank 1 is stopped (target: timeout + a few seconds).
# Run: bash benchmarks/validate_timing.sh [cpu|gpu]
set -u
mode=${1:-cpu}
if [ "$mode" = gpu ]; then
  /usr/bin/time -f "validate --quick (GPU) wall %e s" python3 -m gpuready validate --quick --json > /dev/null
  /usr/bin/time -f "validate default (GPU) wall %e s" python3 -m gpuready validate --json > /dev/null
else
  for i in 1 2 3; do
    /usr/bin/time -f "validate --device cpu --ranks 2 --quick wall %e s" \
      python3 -m gpuready validate --device cpu --ranks 2 --quick --json > /dev/null
  done
  /usr/bin/time -f "stopped rank, --timeout 5: ended after %e s (exit code 4 expected)" \
    env GPUREADY_FAULT=1:stop:collectives python3 -m gpuready validate --device cpu --ranks 2 --quick --timeout 5 --json > /dev/null
fi

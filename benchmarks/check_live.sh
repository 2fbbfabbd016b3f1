#!/usr/bin/env bash
# Live `check` wall time on a GPU machine (targets: --fast < 1 s; full < `import torch` + 0.5 s).
# Run: bash benchmarks/check_live.sh
set -u
for i in 1 2 3; do /usr/bin/time -f "check --fast wall %e s" python3 -m gpuready check --fast --json > /dev/null; done
for i in 1 2 3; do /usr/bin/time -f "check (with torch) wall %e s" python3 -m gpuready check --json > /dev/null; done
for i in 1 2 3; do /usr/bin/time -f "import torch alone %e s" python3 -c "import torch"; done

#!/usr/bin/env bash
# Where `check --fast` spends its time on a GPU machine: wall times, the collectors' durations,
# the import tree and a cProfile of one run. Writes under ${OUT:-/tmp/check-profile}.
# Run: OUT=/tmp/p bash benchmarks/check_fast_profile.sh
set -u
out=${OUT:-/tmp/check-profile}; mkdir -p "$out"
python3 -m gpuready check --fast --json > /dev/null 2>&1   # warm the page cache once
bash "$(dirname "$0")/check_live.sh" 2>&1 | tee "$out/wall.txt"
for i in 1 2 3 4 5; do /usr/bin/time -f "check --fast console wall %e s" python3 -m gpuready check --fast > /dev/null; done 2>&1 | tee -a "$out/wall.txt"
python3 -X importtime -m gpuready check --fast --json > /dev/null 2> "$out/importtime.txt"
python3 -m cProfile -o "$out/fast.prof" -m gpuready check --fast --json > /dev/null
python3 - "$out/fast.prof" > "$out/profile_top.txt" <<'PY'
import pstats, sys
stats = pstats.Stats(sys.argv[1]); stats.sort_stats("cumulative").print_stats(45)
stats.sort_stats("tottime").print_stats(25)
PY
python3 -m gpuready collect --fast --out "$out/bundle-fast" > /dev/null 2>&1
python3 - "$out/bundle-fast" > "$out/collectors.txt" <<'PY'
import json, pathlib, sys
manifest = json.loads((pathlib.Path(sys.argv[1]) / "manifest.json").read_text())
print("total", manifest.get("duration_s"))
rows = manifest.get("files") or manifest.get("collected") or []
items = rows.items() if isinstance(rows, dict) else ((r.get("name") or r.get("file"), r) for r in rows)
for name, row in sorted(items, key=lambda kv: -(kv[1].get("duration_s") or 0))[:15]:
    print(f"{row.get('duration_s')!s:>8} {name} {row.get('command', '')}")
PY
cat "$out/wall.txt" "$out/collectors.txt"
sort -t'|' -k2 -n -r "$out/importtime.txt" | head -25
head -70 "$out/profile_top.txt"

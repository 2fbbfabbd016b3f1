"""How fast `gpuready diagnose` reads a big log, and in how much memory (target: 1 GB in under 30 s, bounded).

Writes a synthetic log of --size-mb (default 1024) to a temporary folder, then runs `gpuready diagnose --json` on it
in a child process and prints its wall time, throughput and peak RSS. Two shapes:
- `training`: a training job's stdout, one NCCL INFO line per 50 lines, a few Xid and a watchdog timeout;
- `nccl-info`: an NCCL_DEBUG=INFO (INIT,COLL) log of 8 interleaved ranks, every line an NCCL line: 7.5 % set-up
  lines (channels, rings, communicators: far more than a real log has), the rest a line per collective.
Run: python benchmarks/diagnose_stream.py [--size-mb N] [--shape training|nccl-info]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRAINING = [
    "[2026-12-01 10:{m:02d}:{s:02d}] step {i} loss 2.{i:04d} lr 3.0e-4 grad_norm 1.{i:03d} tokens/s 412345\n",
] * 48 + [
    "node{r}:12345:12399 [{r}] NCCL INFO Channel 0{c}/0 : {r}[{r}] -> {n}[{n}] via P2P/CUMEM/read\n",
    "[rank{r}]:[W1201 10:{m:02d}:{s:02d}.000000 ProcessGroupNCCL.cpp:1234] Warning: something benign {i}\n",
]
NCCL = [
    "node{h}:{p}:{t} [{r}] NCCL INFO Channel {c:02d}/0 : {r}[{r}] -> {n}[{n}] via P2P/CUMEM/read\n",
    "node{h}:{p}:{t} [{r}] NCCL INFO Connected all rings, use ring PXN 0 GDR 1\n",
    "node{h}:{p}:{t} [{r}] NCCL INFO comm 0x5581 rank {r} nRanks 8 nNodes 1 localRanks 8 localRank {r} MNNVL 0\n",
] + [
    "node{h}:{p}:{t} [{r}] NCCL INFO AllReduce: opCount {i:x} sendbuff 0x7f00 recvbuff 0x7f00 count 1048576 "
    "datatype 7 op 0 root 0 comm 0x5581 [nranks=8] stream 0x55\n",
] * 37  # NCCL_DEBUG_SUBSYS=INIT,COLL: a line per collective is what makes these logs gigabytes long
EVENTS = [
    "[ 1843.308145] NVRM: Xid (PCI:0000:1b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n",
    "[rank3]:[E1201 10:20:00.000000 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=4242, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran "
    "for 600042 milliseconds before timing out.\n",
]


def write_log(path: Path, size_bytes: int, shape: str) -> int:
    templates = TRAINING if shape == "training" else NCCL
    lines = 0
    with open(path, "w") as out:
        block: list[str] = []
        written = 0
        i = 0
        while written < size_bytes:
            r = i % 8
            text = templates[i % len(templates)].format(i=i, m=(i // 60) % 60, s=i % 60, r=r, n=(r + 1) % 8,
                                                        c=i % 16, h=r // 8, p=1000 + r, t=2000 + r)
            block.append(text)
            written += len(text)
            i += 1
            if len(block) == 10_000:
                if i % 400_000 < 10_000:
                    block.append(EVENTS[(i // 400_000) % len(EVENTS)])
                out.write("".join(block))
                lines += len(block)
                block = []
        out.write("".join(block))
        lines += len(block)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--shape", choices=("training", "nccl-info"), default="training")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "rank0.log"
        started = time.monotonic()
        lines = write_log(log, args.size_mb * 2**20, args.shape)
        print(f"wrote {log.stat().st_size / 2**20:,.0f} MiB ({lines:,} lines, shape {args.shape}) "
              f"in {time.monotonic() - started:.1f} s")
        started = time.monotonic()
        child = subprocess.run([sys.executable, "-m", "gpuready", "diagnose", str(log), "--json"],
                               capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        wall = time.monotonic() - started
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        report = json.loads(child.stdout) if child.stdout.strip() else {}
        ids = sorted({f["check_id"] for f in report.get("findings", [])})
        print(f"diagnose: exit {child.returncode}, {wall:.1f} s wall, {args.size_mb / wall:,.0f} MiB/s, "
              f"peak RSS {peak_mib:,.0f} MiB; findings: {', '.join(ids) or child.stderr[-300:]}")


if __name__ == "__main__":
    main()

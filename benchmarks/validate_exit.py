"""What a process that imported torch spends on its way out (runner.signals.exit_without_teardown).

    python benchmarks/validate_exit.py [--repeats 5]

Each sample is a fresh Python that imports torch, sets up what a validate rank has (on a GPU: a CUDA context and a
one-rank NCCL group; on CPUs: a one-rank gloo group), destroys the group as the rank does, and then either returns
(the interpreter's teardown) or ends through exit_without_teardown. The figure is the time from the child's "ready"
line to its exit, seen by this process; medians and ranges of each way, alternated.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

CHILD = """
import os, socket, sys, torch, torch.distributed as dist
cuda = torch.cuda.is_available()
listener = socket.socket(); listener.bind(("127.0.0.1", 0)); port = listener.getsockname()[1]; listener.close()
if cuda:
    torch.zeros(1, device="cuda")
dist.init_process_group("nccl" if cuda else "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1,
                        device_id=torch.device("cuda", 0) if cuda else None)
dist.barrier()
dist.destroy_process_group()
print("ready", flush=True)
if sys.argv[1] == "fast":
    from gpuready.signals import exit_without_teardown
    exit_without_teardown(0)
"""


def sample(way: str) -> float:
    env = {**os.environ, "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    child = subprocess.Popen([sys.executable, "-c", CHILD, way], stdout=subprocess.PIPE, text=True, env=env)
    line = child.stdout.readline()
    ready = time.monotonic()
    child.wait()
    if line.strip() != "ready" or child.returncode != 0:
        raise SystemExit(f"the child ({way}) failed: exit {child.returncode}")
    return time.monotonic() - ready


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    seconds: dict[str, list[float]] = {"teardown": [], "fast": []}
    for _ in range(args.repeats):
        for way in seconds:
            seconds[way].append(sample(way))
    for way, values in seconds.items():
        print(f"{way:9} exit after ready: median {statistics.median(values):.3f} s "
              f"(min {min(values):.3f}, max {max(values):.3f}, n={len(values)})")


if __name__ == "__main__":
    main()

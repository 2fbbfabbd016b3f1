"""CPU use of `gpuready monitor --interval 1` in steady state (target < 2 % of one core).

Starts monitor, lets it settle for 5 s, then reads its CPU time over 30 s. Run on a GPU machine:
python benchmarks/monitor_cpu.py
"""

import subprocess
import sys
import time

import psutil

process = subprocess.Popen([sys.executable, "-m", "gpuready", "monitor", "--interval", "1", "--quiet"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
watched = psutil.Process(process.pid)
time.sleep(5)
before, started = watched.cpu_times(), time.monotonic()
time.sleep(30)
after, wall = watched.cpu_times(), time.monotonic() - started
process.terminate()
process.wait(timeout=10)
used = (after.user - before.user) + (after.system - before.system)
print(f"monitor: {used:.3f} s CPU over {wall:.1f} s = {100 * used / wall:.2f} % of one core (target < 2 %)")

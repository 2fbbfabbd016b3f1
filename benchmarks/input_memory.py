"""Wall time and peak memory of `check --bundle` and `diagnose` on the worst inputs strangers send (issue 20).

    python benchmarks/input_memory.py [--scale 1.0] [--keep DIR]

Each input is built in a temporary folder (about 2.5 GB of disk at scale 1), each verb runs in its own process, and
its peak RSS is that process's own (VmHWM). Targets: under 150 MB for an archive of any member count,
under 500 MB on any input, and an answer (exit code 0-2) without a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
XID_LINE = b"[ 1843.308145] NVRM: Xid (PCI:0000:%02x:00): 79, pid=1234, GPU has fallen off the bus.\n"
TORCH_LINE = (b"[rank%d]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
              b"ProcessGroupNCCL.cpp:1970, unhandled system error\n")
NCCL_LINE = b"node1:123:456 [%d] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"


def _repeat_lines(path: Path, line: bytes, total_bytes: int) -> Path:
    with open(path, "wb") as out:
        block = b"".join(line % (index % 256) for index in range(4096))
        for _ in range(max(1, total_bytes // len(block))):
            out.write(block)
    return path


def _symlink_tar(path: Path, members: int, mode: str) -> Path:
    with tarfile.open(path, mode) as archive:
        for index in range(members):
            member = tarfile.TarInfo(f"b/link{index}")
            member.type, member.linkname = tarfile.SYMTYPE, "/etc/passwd"
            archive.addfile(member)
    return path


def _big_q_files(folder: Path, files: int, bytes_each: int) -> Path:
    """Many `nvidia-smi -q` outputs of many GPUs each: every one a tool output parsed whole."""
    folder.mkdir(exist_ok=True)
    q_text = (FIXTURES / "public" / "pcie-8gpu-2socket" / "nvidia-smi-q-8x4090.txt").read_bytes()
    header, _, gpus = q_text.partition(b"\nGPU ")
    gpu = b"\nGPU " + gpus
    body = header + gpu * max(1, (bytes_each - len(header)) // len(gpu))
    for index in range(files):
        (folder / f"node{index}-nvidia-smi-q.txt").write_bytes(body)
    return folder


def _flight_recorder(path: Path, total_bytes: int) -> Path:
    entry = {"record_id": 0, "collective_seq_id": 1, "profiling_name": "nccl:all_reduce", "state": "scheduled",
             "frames": [{"name": "forward", "filename": "train.py", "line": 10}] * 20}
    count = max(1, total_bytes // len(json.dumps(entry)))
    path.write_text(json.dumps({"version": "2.4", "pg_config": {}, "entries": [entry] * count}))
    return path


def inputs(folder: Path, scale: float) -> dict[str, tuple[Path, tuple[str, ...], tuple[str, ...]]]:
    """name → (input, the verbs it is given to, their options)."""
    mb = lambda count: int(count * scale * 2**20)  # noqa: E731
    nul = folder / "nul.bin"
    with open(nul, "wb") as out:
        out.truncate(mb(1024))  # a sparse gigabyte of NUL bytes
    both, diagnose = ("check", "diagnose"), ("diagnose",)
    links_tar = _symlink_tar(folder / "links.tar", int(300_000 * scale), "w")
    links_gz = _symlink_tar(folder / "links.tar.gz", int(300_000 * scale), "w:gz")
    every_member = ("--max-members", "100000000")
    return {
        "1 GiB of NUL bytes": (nul, both, ()),
        "300k symlink members (.tar)": (links_tar, both, ()),
        "300k symlink members (.tar.gz)": (links_gz, both, ()),
        "300k symlinks, --max-members 1e8": (links_tar, both, every_member),
        "300k symlinks .gz, --max-members 1e8": (links_gz, both, every_member),
        "12 x 64 MiB nvidia-smi -q": (_big_q_files(folder / "q", 12, mb(64)), diagnose, ()),
        "200 MiB of Xid lines": (_repeat_lines(folder / "xid.log", XID_LINE, mb(200)), both, ()),
        "200 MiB of torch errors": (_repeat_lines(folder / "torch.log", TORCH_LINE, mb(200)), diagnose, ()),
        "200 MiB of NCCL INFO": (_repeat_lines(folder / "nccl.log", NCCL_LINE, mb(200)), diagnose, ()),
        "30 MiB flight recorder": (_flight_recorder(folder / "nccl_trace_rank_0.json", mb(30)), diagnose, ()),
    }


_MEASURED = """
import atexit, sys
def _peak():  # VmHWM is this process image's own peak (ru_maxrss would carry the parent's over from fork)
    with open("/proc/self/status") as status:
        peak_kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    with open(sys.argv[1], "w") as out:
        out.write(str(peak_kib))
atexit.register(_peak)
from gpuready.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


def run(verb: str, path: Path, options: tuple[str, ...]) -> tuple[float, float, int, str]:
    """(seconds, peak RSS in MB, exit code, last stderr line)."""
    with tempfile.NamedTemporaryFile(suffix=".peak") as peak:
        command = [sys.executable, "-c", _MEASURED, peak.name,
                   *(("check", "--bundle") if verb == "check" else ("diagnose",)), str(path), "--json", *options]
        started = time.perf_counter()
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
        seconds = time.perf_counter() - started
        peak_kib = int(Path(peak.name).read_text() or 0)
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    return seconds, peak_kib / 1024, done.returncode, lines[-1][:100] if lines else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="input sizes (and member counts) times this")
    parser.add_argument("--keep", type=Path, help="build the inputs in this folder and keep them")
    args = parser.parse_args(argv)
    folder = Path(args.keep or tempfile.mkdtemp(prefix="gpuready-worst-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        worst_rss = 0.0
        print(f"{'input':36} {'verb':9} {'wall s':>7} {'peak MB':>8} {'exit':>4}  stderr")
        for name, (path, verbs, options) in inputs(folder, args.scale).items():
            for verb in verbs:
                seconds, rss_mb, code, said = run(verb, path, options)
                worst_rss = max(worst_rss, rss_mb)
                print(f"{name:36} {verb:9} {seconds:7.1f} {rss_mb:8.0f} {code:4}  {said}", flush=True)
        print(f"worst peak RSS {worst_rss:.0f} MB (target: under 500 MB on any input)")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

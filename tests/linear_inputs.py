"""Pathological inputs and the readers of untrusted text they are fed to (tests/test_linear_readers.py and
benchmarks/reader_scaling.py share them)."""

from __future__ import annotations

from pathlib import Path

from gpuready.evidence.sniff import kind_of, why_not_text
from gpuready.facts.cuda_samples import parse_cuda_p2p
from gpuready.facts.kernel_log import parse_kernel_log
from gpuready.facts.lspci import parse_lspci
from gpuready.evidence.machines import machine_of
from gpuready.facts.nvidia_smi_plain import parse_nvidia_smi_plain
from gpuready.facts.nvidia_smi_q import parse_nvidia_smi_q_text
from gpuready.facts.topology import parse_nvlink_status, parse_topo_matrix


def _repeat(piece: str):
    return lambda size: piece * max(1, size // len(piece))


def _diagnose(text: str) -> None:
    import tempfile
    from gpuready.verbs.diagnose.run import diagnose
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "input.log"
        path.write_text(text)
        diagnose([path])


READERS = {
    "sniff": kind_of,
    "binary test": why_not_text,
    "kernel log": parse_kernel_log,
    "nvidia-smi -q text": parse_nvidia_smi_q_text,
    "nvidia-smi": parse_nvidia_smi_plain,
    "topo -m": parse_topo_matrix,
    "nvlink -s": parse_nvlink_status,
    "lspci": parse_lspci,
    "cuda samples": parse_cuda_p2p,
    "machine of dmesg": lambda text: machine_of("dmesg.txt", text),
    "machine of smi": lambda text: machine_of("nvidia-smi.txt", text),
    "diagnose": _diagnose,
}

SHAPES = {
    "one char run": _repeat("="),
    "blank lines": _repeat("\n"),
    "spaces": _repeat(" "),
    "tabs and newlines": _repeat("\t\n"),
    "one long line": lambda size: "GPU 00000000:3B:00.0\n    Product Name : " + "a" * size + "\n",
    "repeated marker": _repeat("NVRM: Xid (PCI:0000:3b:00): 13, "),
    "many driver loads": _repeat("[ 1.0] NVRM: Xid (PCI:0000:3b:00): 79, x\n"
                                 "[ 2.0] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  x\n"),
    "topo rows": _repeat("GPU0\tX\tNV18\tNV18\n"),
    "nested -q": lambda size: "GPU 00000000:3B:00.0\n" + "".join(
        " " * (4 * (depth % 40)) + f"Key{depth} : value\n" for depth in range(size // 60)),
    "brackets": _repeat("[ "),
    "p2p lines": _repeat("Device=0 CANNOT Access Peer Device=1\n"),
    "nccl-tests header": _repeat("#  out-of-place  in-place\n\n"),
    "undefined symbol": _repeat("undefined symbol: ncclCommInitRankConfig "),
    "long -q key": lambda size: "GPU 00000000:3B:00.0\n    " + "a " * (size // 2) + ": x\n",
    "mixed pieces": _repeat("=\n \t[ GPU0 X NV18 | Processes:  NVRM: Xid (PCI:0000:3b:00): 79, \n\n# size count type "),
}

# Pieces a hypothesis test strings together: markers of every reader, runs of separators, a line break.
PIECES = ["=", " ", "\t", "\n", "\n\n", "GPU0", " X ", "NV18", "NVRM: Xid (PCI:0000:3b:00): 79, ", "# size count type ",
          "| Processes:", "[ 1.0] ", "undefined symbol: nccl", "NCCL WARN ", "Device=0 CANNOT Access Peer Device=1",
          "GPU 00000000:3B:00.0", "    Key : value", "{\"files\":", "<nvidia_smi_log", "\x1b[31m", "\x00"]

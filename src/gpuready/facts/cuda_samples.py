"""CUDA samples that people paste to show peer-to-peer access: `p2pBandwidthLatencyTest` and `simpleP2P`.

Both enumerate the GPUs through CUDA (so every GPU they list is one the driver reaches) and say, per ordered pair,
whether peer access works:
    Device: 4, NVIDIA GeForce RTX 2080 Ti, pciBusID: 84, pciDeviceID: 0, pciDomainID:0      (bus id in decimal)
    Device=0 CANNOT Access Peer Device=1          /  Device=0 CAN Access Peer Device=1
    > GPU0 = "     Tesla K40m" IS  capable of Peer-to-Peer (P2P)
    > Peer access from Tesla K40m (GPU0) -> Tesla K40m (GPU1) : Yes
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuready.facts.bad_input import ParseFailure
from gpuready.facts.marked_lines import line_start
from gpuready.facts.types import GpuFacts

# `^` (a line's start) as a look back after the first words: the engine skips to those at C speed (a regex that starts
# with `^` is tried at every character).
_DEVICE = re.compile(line_start("Device: ") + r"(\d{1,3}), ([^,\n]{1,80}), pciBusID: ([0-9a-fA-F]{1,3}), "
                     r"pciDeviceID: ([0-9a-fA-F]{1,3}), pciDomainID:\s?([0-9a-fA-F]{1,4})")
_CAN = re.compile(line_start("Device=") + r"(\d{1,3}) (CAN|CANNOT) Access Peer Device=(\d{1,3})")
_SIMPLE_GPU = re.compile(line_start("> GPU") + r'(\d{1,3}) = "\s{0,20}([^"\n]{1,80})" IS ')
_SIMPLE_PEER = re.compile(line_start("> Peer access from ") + r"[^\n]{0,100}?\(GPU(\d{1,3})\) -> [^\n]{0,100}?"
                          r"\(GPU(\d{1,3})\) : (Yes|No)")
# What p2pBandwidthLatencyTest and simpleP2P print first: how sniff.py tells them apart from a log.
SHAPE = re.compile(r"P2P \(Peer-to-Peer\) GPU Bandwidth Latency Test|" + line_start("Device=") +
                   r"\d{1,3} CAN(?:NOT)? Access Peer Device=|\[\./simpleP2P\] - Starting|" +
                   line_start("> Peer access from "))


@dataclass
class CudaP2p:
    gpus: list[GpuFacts] = field(default_factory=list)
    p2p: dict[tuple[int, int], str] = field(default_factory=dict)
    """(i, j) → `OK` or `NS` (as `nvidia-smi topo -p2p r` spells them), CUDA device numbers."""


def parse_cuda_p2p(text: str) -> CudaP2p:
    result = CudaP2p()
    for match in _DEVICE.finditer(text):
        # CUDA prints the PCI domain, bus and device numbers in decimal
        bus_id = f"{int(match.group(5)):04x}:{int(match.group(3)):02x}:{int(match.group(4)):02x}.0"
        result.gpus.append(GpuFacts(index=int(match.group(1)), bus_id=bus_id, name=match.group(2).strip(),
                                    source="cuda-p2p.txt"))
    if not result.gpus:
        result.gpus = [GpuFacts(index=int(match.group(1)), bus_id=None, name=match.group(2).strip(),
                                source="cuda-p2p.txt") for match in _SIMPLE_GPU.finditer(text)]
    # findall: the groups as tuples built in C (a test of many GPU pairs prints a line for each)
    for first, verb, second in _CAN.findall(text):
        result.p2p[(int(first), int(second))] = "OK" if verb == "CAN" else "NS"
    for first, second, answer in _SIMPLE_PEER.findall(text):
        result.p2p[(int(first), int(second))] = "OK" if answer == "Yes" else "NS"
    if not result.gpus and not result.p2p:
        raise ParseFailure("parse.cuda_p2p.none")
    return result

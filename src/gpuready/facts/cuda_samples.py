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

from gpuready.facts.types import GpuFacts

_DEVICE = re.compile(r"^Device: (\d{1,3}), ([^,\n]{1,80}), pciBusID: ([0-9a-fA-F]{1,3}), pciDeviceID: ([0-9a-fA-F]{1,3}), "
                     r"pciDomainID:\s?([0-9a-fA-F]{1,4})", re.MULTILINE)
_CAN = re.compile(r"^Device=(\d{1,3}) (CAN|CANNOT) Access Peer Device=(\d{1,3})", re.MULTILINE)
_SIMPLE_GPU = re.compile(r'^> GPU(\d{1,3}) = "\s{0,20}([^"\n]{1,80})" IS ', re.MULTILINE)
_SIMPLE_PEER = re.compile(r"^> Peer access from [^\n]{0,100}?\(GPU(\d{1,3})\) -> [^\n]{0,100}?\(GPU(\d{1,3})\) : (Yes|No)",
                          re.MULTILINE)
# What p2pBandwidthLatencyTest and simpleP2P print first: how sniff.py tells them apart from a log.
SHAPE = re.compile(r"P2P \(Peer-to-Peer\) GPU Bandwidth Latency Test|^Device=\d{1,3} CAN(?:NOT)? Access Peer Device=|"
                   r"\[\./simpleP2P\] - Starting|^> Peer access from ", re.MULTILINE)


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
    for match in _CAN.finditer(text):
        result.p2p[(int(match.group(1)), int(match.group(3)))] = "OK" if match.group(2) == "CAN" else "NS"
    for match in _SIMPLE_PEER.finditer(text):
        result.p2p[(int(match.group(1)), int(match.group(2)))] = "OK" if match.group(3) == "Yes" else "NS"
    if not result.gpus and not result.p2p:
        raise ValueError("neither a CUDA device list nor peer-access lines found")
    return result

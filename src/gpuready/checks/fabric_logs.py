"""Log lines that show the NVSwitch/NVLink fabric not usable, for gpu.fabric (checks/topology.py judges them).

- `dcgmi diag`: a test whose every reason is CUDA's `system not yet initialized` (cudaErrorSystemNotReady, 802, from
  cuInit): the GPUs are not registered with the fabric (facts/dcgm_diag.py `DiagTest.cuda_not_ready`).
- NCCL: a `WARN` that NCCL's CUDA-check macros print (`Cuda failure <n> '<text>'`, NCCL src/include/checks.h) at a line
  of its NVLink SHARP transport, `transport/nvls.cc` (NCCL's WARN prefix names `file:line`, src/debug.cc): the
  multicast objects NVLS allocates through the fabric could not be made (the fabric state after a Fabric Manager
  restart without a GPU reset, NVIDIA/nccl#1488; Fabric Manager User Guide).
"""

from __future__ import annotations

import re

from gpuready.checks.registry import CheckContext
from gpuready.facts.log_facts import Line

NVLS_REF = "NVIDIA/nccl src/transport/nvls.cc (NVLink SHARP buffers through cuMulticastCreate), src/include/checks.h (Cuda failure)"
_NVLS_CUDA_FAILURE = re.compile(r"\btransport/nvls\.cc:\d{1,6}\b[^\n]{0,40}NCCL WARN Cuda failure")


def dcgm_cuda_not_ready_lines(context: CheckContext) -> list[Line]:
    """The rows of DCGM tests that never ran because CUDA returned 802 on the GPUs."""
    dcgm = context.facts.logs.dcgm if context.facts.logs is not None else None
    lines: list[Line] = []
    for run in dcgm.runs if dcgm else []:
        for test in run.diag.tests:
            if test.result == "Fail" and test.cuda_not_ready:
                lines += [run.refs[index] for index in test.rows if index < len(run.refs)]
    return lines


def nvls_failure_lines(context: CheckContext) -> list[Line]:
    """NCCL WARN lines of a CUDA failure inside the NVLS transport."""
    nccl = context.facts.logs.nccl if context.facts.logs is not None else None
    if nccl is None:
        return []
    return [line for group in nccl.warns.values() for line in group.lines if _NVLS_CUDA_FAILURE.search(line.text)]

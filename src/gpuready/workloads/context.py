"""What a workload sees inside its rank."""

from __future__ import annotations

import os
import signal
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from gpuready.i18n import Said
from gpuready.runner.progress import ProgressReporter

# Fault injection for the watchdog's own tests: GPUREADY_FAULT="RANK:stop|exit|raise|sleep:PHASE" (`sleep`: alive,
# heartbeat beating, never advancing, as a rank stuck in a collective is).
FAULT_VARIABLE = "GPUREADY_FAULT"


@dataclass(kw_only=True)
class RankOptions:
    quick: bool = False
    timeout_s: float = 120.0
    """Longest one collective (or one measured step) may take before the rank counts as hung."""
    min_bytes: int = 8
    max_bytes: int | None = None
    """None: 1 GiB on GPUs, 64 MiB on CPUs (4 MiB with --quick)."""
    dtypes: tuple[str, ...] = ()
    burn: dict = field(default_factory=dict)
    """burn's settings: duration_s, dtype, self_test."""
    train: dict = field(default_factory=dict)
    """bench's settings for the training workload (workloads/train.py: its TrainSettings fields)."""
    train_runs: dict = field(default_factory=dict)
    """Under torchrun, one group runs every strategy in turn: strategy → its settings (workloads `train.<strategy>`)."""


@dataclass(kw_only=True)
class RankContext:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    device: Any
    """torch.device: cuda:<local_rank> or cpu."""
    backend: str
    progress: ProgressReporter
    options: RankOptions
    host: str = field(default_factory=socket.gethostname)
    gpu_bus_id: str | None = None
    gpu_uuid: str | None = None
    gpu_name: str | None = None
    publish_partial: Any = None
    """Stores what the running workload measured so far (kept if the rank is later lost)."""
    store: Any = None
    """The run's key-value store (the runner's or the rendezvous store): where ranks wait for one another without a
    collective, whose timeout would be the operation timeout."""
    gpu_users: dict | None = None
    """Under torchrun: who else computes on this rank's GPU, read before the rank made its own context there
    (worker.own_gpu_users); None on local runs, whose parent watches the GPUs."""

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def step(self, phase: str, operation: str | Said, timeout_s: float | None = None, **typed: Any) -> None:
        """Announce the next operation (to the watchdog) before starting it; an injected fault strikes inside it.
        `operation`: a name, or catalogue text (`said("op.…")`) that the reader renders in the user's language.
        `typed`: the post's fields (gpuready.progress.RankPost: step, total, warm_up, stage, figures, errors), which
        also fill the message's placeholders of those names."""
        self.progress.post(phase, operation, self.options.timeout_s if timeout_s is None else timeout_s, **typed)
        self.maybe_inject_fault(phase)

    def publish(self, partial: dict) -> None:
        if self.publish_partial is not None:
            self.publish_partial(partial)

    def maybe_inject_fault(self, phase: str) -> None:
        fault = os.environ.get(FAULT_VARIABLE, "")
        parts = fault.split(":")
        if len(parts) != 3 or parts[2] != phase or int(parts[0]) != self.rank:
            return
        os.environ.pop(FAULT_VARIABLE)  # once
        if parts[1] == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        elif parts[1] == "exit":
            os._exit(17)
        elif parts[1] == "raise":
            raise RuntimeError(f"fault injected by {FAULT_VARIABLE}")
        elif parts[1] == "sleep":
            print(f"{FAULT_VARIABLE}: rank {self.rank} sleeps in {phase}", flush=True)  # tests wait for this line
            while True:
                time.sleep(60)


def runtime_versions(torch: Any) -> dict[str, str]:
    """torch, CUDA and NCCL versions, and the NCCL/CUDA variables set, as every rank result carries them."""
    versions = {"torch": torch.__version__}
    if torch.version.cuda:
        versions["cuda"] = torch.version.cuda
        try:
            versions["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:
            pass
    for variable in ("NCCL_NVLS_ENABLE", "NCCL_ALGO", "NCCL_PROTO", "NCCL_P2P_DISABLE", "CUDA_DEVICE_MAX_CONNECTIONS"):
        if variable in os.environ:
            versions[variable] = os.environ[variable]
    return versions

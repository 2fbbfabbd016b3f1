"""`gpuready validate`: measured compute, transfers, P2P, collectives and a DDP run (run.py), judged in judge.py."""

from gpuready.runner.torchrun import under_torchrun
from gpuready.verbs.validate.run import GPU_ONLY, WORKLOADS, ValidateOptions, build_report, predicted_seconds, run_local_validate, run_torchrun_rank
from gpuready.devices import local_facts, resolve_device, visible_devices

__all__ = ["GPU_ONLY", "WORKLOADS", "ValidateOptions", "build_report", "local_facts", "predicted_seconds",
           "resolve_device", "run_local_validate", "run_torchrun_rank", "under_torchrun", "visible_devices"]

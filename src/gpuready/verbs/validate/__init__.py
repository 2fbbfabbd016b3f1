"""`gpuready validate`: measured compute, transfers, P2P, collectives and a DDP run (run.py), judged in judge.py."""

from gpuready.verbs.validate.run import (GPU_ONLY, WORKLOADS, ValidateOptions, build_report, local_facts,
                                         predicted_seconds, rendezvous_store_address, resolve_device,
                                         run_local_validate, run_torchrun_rank, torchrun_command, under_torchrun,
                                         visible_devices)

__all__ = ["GPU_ONLY", "WORKLOADS", "ValidateOptions", "build_report", "local_facts", "predicted_seconds",
           "rendezvous_store_address", "resolve_device", "run_local_validate", "run_torchrun_rank",
           "torchrun_command", "under_torchrun", "visible_devices"]

"""One rank: `python -m gpuready.workloads.worker`, started by the local runner or by torchrun.

It joins the process group, runs the selected workloads in order, and after each one stores
what it measured under its rank in the rendezvous store, so a later hang keeps earlier results.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import traceback
import warnings
from datetime import timedelta
from typing import Any, Callable

from gpuready.workloads.context import RankContext, RankOptions
from gpuready.runner.progress import RESULT_KEY, ProgressReporter

SPEC_VARIABLE = "GPUREADY_VALIDATE_SPEC"
STORE_VARIABLE = "GPUREADY_STORE"  # host:port of the runner's TCPStore (local runs only)
# host:port of the rendezvous store of a `gpuready validate --nnodes` run: the ranks build their process group
# on it rather than on a second store that torchrun's rank-0 agent (or rank 0) would listen with on every interface.
RDZV_STORE_VARIABLE = "GPUREADY_RDZV_STORE"
# The key under which the gpuready process hosting that store says what address it listens on.
RDZV_BIND_KEY = "gpuready/store_bind"
# A workload raised: its error is stored, and the rank leaves rather than desynchronise its peers.
WORKLOAD_FAILED_EXIT = 3


def workload_functions() -> dict[str, Callable[[RankContext], Any]]:
    from gpuready.workloads import burn, collectives, ddp, gpu_bench
    return {
        "burn": burn.run_burn,
        "compute": gpu_bench.run_compute,
        "transfer": gpu_bench.run_transfer,
        "p2p": gpu_bench.run_p2p,
        "collectives": collectives.run_collectives_as_dict,
        "ddp": ddp.run_ddp,
    }


GPU_ONLY = ("compute", "transfer", "p2p")


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


def _connect_store(timeout_s: float, variable: str = STORE_VARIABLE):
    import torch.distributed as dist
    endpoint = os.environ.get(variable)
    if not endpoint:
        return None
    host, port = endpoint.rsplit(":", 1)
    return dist.TCPStore(host.strip("[]"), int(port), is_master=False, timeout=timedelta(seconds=timeout_s))


def quiet_torch_import_warnings() -> None:
    """torch warns "Failed to initialize NumPy" on import where numpy is absent; gpuready uses no numpy."""
    warnings.filterwarnings("ignore", message=r"Failed to initialize NumPy", category=UserWarning)


def rendezvous_run_store(timeout_s: float):
    """Under `gpuready validate --nnodes`: this run's part of the rendezvous store (a client), else None."""
    import torch.distributed as dist
    store = _connect_store(timeout_s, RDZV_STORE_VARIABLE)
    if store is None:
        return None
    run = f"{os.environ.get('TORCHELASTIC_RUN_ID', 'none')}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    return dist.PrefixStore(f"gpuready/{run}", store)


def _gpu_identity(torch: Any, index: int) -> tuple[str | None, str | None, str | None]:
    properties = torch.cuda.get_device_properties(index)
    bus_id = None
    if hasattr(properties, "pci_bus_id"):
        bus_id = f"{properties.pci_domain_id:04x}:{properties.pci_bus_id:02x}:{properties.pci_device_id:02x}.0"
    uuid = str(properties.uuid) if hasattr(properties, "uuid") else None
    if uuid and not uuid.startswith("GPU-"):
        uuid = f"GPU-{uuid}"
    return bus_id, uuid, properties.name


def main(on_ready: Callable[[Any], None] | None = None, on_done: Callable[[Any], None] | None = None) -> int:
    """Run this rank. `on_ready(store)` once the group is up, `on_done(store)` after every rank finished."""
    spec = json.loads(os.environ[SPEC_VARIABLE])
    rank, world_size = _env_int("RANK", 0), _env_int("WORLD_SIZE", 1)
    local_rank, local_world = _env_int("LOCAL_RANK", rank), _env_int("LOCAL_WORLD_SIZE", world_size)
    options = RankOptions(**spec["options"])

    quiet_torch_import_warnings()
    import torch
    import torch.distributed as dist

    use_cuda = spec["device"] == "cuda"
    bus_id = uuid = name = None
    gpu_index = local_rank % max(1, torch.cuda.device_count()) if use_cuda else 0  # gloo may share a GPU
    if use_cuda:
        torch.cuda.set_device(gpu_index)
        bus_id, uuid, name = _gpu_identity(torch, gpu_index)
    device = torch.device("cuda", gpu_index) if use_cuda else torch.device("cpu")
    backend = spec.get("backend") or ("nccl" if use_cuda else "gloo")
    store = _connect_store(spec["startup_timeout_s"])
    independent = not spec.get("collectives", True)  # burn: no process group, a lost GPU blocks nobody
    if store is not None:
        ProgressReporter(store, rank, bus_id, os.getpid()).post("startup", "init_process_group",
                                                                spec["startup_timeout_s"])
    if independent:
        pass
    elif store is not None:
        dist.init_process_group(backend, store=dist.PrefixStore("pg", store), rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=options.timeout_s + 30),
                                device_id=device if backend == "nccl" else None)
    elif (store := rendezvous_run_store(spec["startup_timeout_s"])) is not None:  # gpuready --nnodes: its store
        dist.init_process_group(backend, store=dist.PrefixStore("pg", store), rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=options.timeout_s + 30),
                                device_id=device if backend == "nccl" else None)
    else:  # under a torchrun of the user's own: its rendezvous, its store
        dist.init_process_group(backend, timeout=timedelta(seconds=options.timeout_s + 30),
                                device_id=device if backend == "nccl" else None)
        store = dist.distributed_c10d._get_default_store()

    progress = ProgressReporter(store, rank, bus_id, os.getpid())
    ctx = RankContext(rank=rank, world_size=world_size, local_rank=local_rank, local_world_size=local_world,
                      node_rank=_env_int("GROUP_RANK", 0), device=device, backend=backend, progress=progress,
                      options=options, gpu_bus_id=bus_id, gpu_uuid=uuid, gpu_name=name)
    if on_ready:
        on_ready(store)
    if not independent:
        ctx.step("startup", "first collective (communicator set-up)", timeout_s=spec["startup_timeout_s"])
        dist.barrier()
    ctx.step("ready", "every rank is up" if not independent else "started")

    result: dict[str, Any] = {"rank": rank, "host": socket.gethostname(), "local_rank": local_rank,
                              "node_rank": ctx.node_rank, "gpu": {"bus_id": bus_id, "uuid": uuid, "name": name},
                              "backend": backend, "versions": _versions(torch), "workloads": {}}
    functions = workload_functions()

    def publish_partial(partial: dict) -> None:
        store.set(RESULT_KEY.format(rank=rank), json.dumps({**result, "workloads": {
            **result["workloads"], current[0]: {**partial, "partial": True}}}))
    ctx.publish_partial = publish_partial
    current = [""]
    for workload in spec["workloads"]:
        current[0] = workload
        if workload in GPU_ONLY and not use_cuda:
            continue
        try:
            result["workloads"][workload] = functions[workload](ctx)
        except Exception as error:
            result["workloads"][workload] = {"error": f"{type(error).__name__}: {error}",
                                             "traceback": traceback.format_exc(limit=8)}
            store.set(RESULT_KEY.format(rank=rank), json.dumps(result))
            progress.post("failed", workload)
            traceback.print_exc()
            sys.stdout.flush()
            os._exit(WORKLOAD_FAILED_EXIT)  # peers would wait forever in their next collective
        store.set(RESULT_KEY.format(rank=rank), json.dumps(result))
    store.set(RESULT_KEY.format(rank=rank), json.dumps(result))
    progress.post("done", "finished")
    if independent:
        return 0
    try:
        dist.barrier()
        if on_done:
            on_done(store)
        dist.barrier()
        dist.destroy_process_group()
    except Exception:
        pass
    return 0


def _versions(torch: Any) -> dict[str, str]:
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


if __name__ == "__main__":
    sys.exit(main())

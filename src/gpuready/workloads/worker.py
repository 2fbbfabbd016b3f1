"""One rank: `python -m gpuready.workloads.worker`, started by the local runner or by torchrun.

It joins the process group, runs the selected workloads in order, and after each one stores
what it measured under its rank in the rendezvous store, so a later hang keeps earlier results.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import traceback
import warnings
from datetime import timedelta
from dataclasses import dataclass
from typing import Any, Callable

from gpuready.facts.gpu_users import own_gpu_users as read_own_gpu_users
from gpuready.i18n import said
from gpuready.node import node_name
from gpuready.workloads import between_nodes, burn, collectives, ddp, gpu_bench, train
from gpuready.workloads.context import RankContext, RankOptions, runtime_versions
from gpuready.runner.progress import (RDZV_STORE_VARIABLE, RESULT_KEY, SPEC_VARIABLE, STORE_VARIABLE, Heartbeat,
                                      ProgressReporter, run_store_prefix)
from gpuready.signals import die_with_parent, exit_without_teardown, handle_stop_signals_in_thread
from gpuready.runner.watchdog import WORKLOAD_FAILED_EXIT

PROCESS_STARTED = time.monotonic()
"""When this rank's Python reached gpuready (its own start-up, torch's import and CUDA's set-up are measured from
here: `startup_s`)."""


def workload_functions() -> dict[str, Callable[[RankContext], Any]]:
    return {
        "train": train.run_train,
        **{f"train.{strategy}": train.group_run(strategy) for strategy in train.STRATEGIES},
        "burn": burn.run_burn,
        "compute": gpu_bench.run_compute,
        "transfer": gpu_bench.run_transfer,
        "p2p": gpu_bench.run_p2p,
        "collectives": collectives.run_collectives_as_dict,
        "ddp": ddp.run_ddp,
        "between_nodes": between_nodes.run_between_nodes,
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
    return dist.PrefixStore(run_store_prefix(os.environ.get("TORCHELASTIC_RUN_ID", "none"),
                                             os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")), store)


def _gpu_identity(torch: Any, index: int) -> tuple[str | None, str | None, str | None]:
    properties = torch.cuda.get_device_properties(index)
    bus_id = None
    if hasattr(properties, "pci_bus_id"):
        bus_id = f"{properties.pci_domain_id:04x}:{properties.pci_bus_id:02x}:{properties.pci_device_id:02x}.0"
    uuid = str(properties.uuid) if hasattr(properties, "uuid") else None
    if uuid and not uuid.startswith("GPU-"):
        uuid = f"GPU-{uuid}"
    return bus_id, uuid, properties.name


@dataclass(kw_only=True)
class Hooks:
    """What the process that started this rank wants told (runner/torchrun.py: rank 0 watches and reports)."""

    on_ready: Callable[[Any], None] | None = None
    """`on_ready(store)` once the group is up."""
    on_done: Callable[[Any], None] | None = None
    """`on_done(store)` after every rank finished."""
    on_signal: Callable[[Any, int], None] | None = None
    """`on_signal(store, signum)` when SIGTERM/SIGHUP arrives (from a thread; the process then exits 128 + signum)."""
    on_failed: Callable[[Any], None] | None = None
    """`on_failed(store)` when a workload raised, after its error is stored (the process then exits 3)."""


def main(on_ready: Callable[[Any], None] | None = None, on_done: Callable[[Any], None] | None = None,
         on_signal: Callable[[Any, int], None] | None = None, on_failed: Callable[[Any], None] | None = None) -> int:
    """Run this rank: join the group, run the spec's workloads in order (each one's results stored as it ends), then
    the final barrier. The hooks: see Hooks."""
    hooks = Hooks(on_ready=on_ready, on_done=on_done, on_signal=on_signal, on_failed=on_failed)
    die_with_parent()
    reached: dict[str, Any] = {}  # what the signal thread needs: the store and this rank's reporter, once known

    def stopped(signum: int) -> None:
        if "progress" in reached:
            try:
                reached["progress"].post("terminated", said("op.signal", signal=signum))
            except Exception:
                pass
        if hooks.on_signal is not None and "store" in reached:
            hooks.on_signal(reached["store"], signum)
    handle_stop_signals_in_thread(stopped)  # before torch starts its threads: they inherit the blocked mask
    spec = json.loads(os.environ[SPEC_VARIABLE])
    quiet_torch_import_warnings()
    import torch  # the rank's own import (seconds), after the signal mask is set
    import torch.distributed as dist

    ctx, independent = _join(torch, dist, spec)
    reached.update(store=ctx.store, progress=ctx.progress)
    heartbeat = Heartbeat(ctx.store, ctx.rank)
    if hooks.on_ready:
        hooks.on_ready(ctx.store)
    if not independent:
        ctx.step("startup", said("op.first_collective"), timeout_s=spec["startup_timeout_s"])
        dist.barrier()
        set_operation_timeout(dist, timedelta(seconds=ctx.options.timeout_s + 30))
    group_timeouts_s = {"startup": spec["startup_timeout_s"],
                        "operations": None if independent else operation_timeout_s(dist, ctx.device)}
    ctx.step("ready", said("op.all_up" if not independent else "op.started"))
    result: dict[str, Any] = {"rank": ctx.rank, "host": socket.gethostname(), "local_rank": ctx.local_rank,
                              "startup_s": round(time.monotonic() - PROCESS_STARTED, 2), "workload_s": {},
                              "node_rank": ctx.node_rank, "node": node_name(),  # the scheduler's name (node.py)
                              "gpu": {"bus_id": ctx.gpu_bus_id, "uuid": ctx.gpu_uuid, "name": ctx.gpu_name},
                              "backend": ctx.backend, "versions": runtime_versions(torch), "workloads": {},
                              "group_timeouts_s": group_timeouts_s,
                              **({"gpu_users": ctx.gpu_users} if ctx.gpu_users is not None else {})}
    _run_workloads(ctx, spec["workloads"], result, hooks)
    if not independent:
        _finish(dist, ctx, hooks)
    try:
        ctx.progress.post("done", said("op.finished"))
    except Exception:  # the store's host (rank 0's node) may have left first
        pass
    heartbeat.stop()
    return 0


def _join(torch: Any, dist: Any, spec: dict[str, Any]) -> tuple[RankContext, bool]:
    """This rank's context once it has joined its group (none for independent workers: burn), and whether it is
    independent."""
    rank, world_size = _env_int("RANK", 0), _env_int("WORLD_SIZE", 1)
    local_rank, local_world = _env_int("LOCAL_RANK", rank), _env_int("LOCAL_WORLD_SIZE", world_size)
    use_cuda = spec["device"] == "cuda"
    bus_id = uuid = name = None
    gpu_index = local_rank % max(1, torch.cuda.device_count()) if use_cuda else 0  # gloo may share a GPU
    users_of_gpu = None
    if use_cuda:
        bus_id, uuid, name = _gpu_identity(torch, gpu_index)
        if os.environ.get(STORE_VARIABLE) is None:
            # under torchrun: read who else computes on this GPU before this rank makes its own context there
            users_of_gpu = own_gpu_users(bus_id)
        torch.cuda.set_device(gpu_index)
    device = torch.device("cuda", gpu_index) if use_cuda else torch.device("cpu")
    backend = spec.get("backend") or ("nccl" if use_cuda else "gloo")
    store = _connect_store(spec["startup_timeout_s"])
    independent = not spec.get("collectives", True)  # burn: no process group, a lost GPU blocks nobody
    if store is None and not independent:
        store = rendezvous_run_store(spec["startup_timeout_s"])  # gpuready --nnodes: its store
    if store is not None:
        ProgressReporter(store, rank, bus_id, os.getpid()).post("startup", "init_process_group",
                                                                spec["startup_timeout_s"])
    # Start-up gets the start-up timeout (NCCL's eager init included); operations then get theirs (set_pg_timeout).
    group_options = {"timeout": timedelta(seconds=spec["startup_timeout_s"]),
                     "device_id": device if backend == "nccl" else None}
    if independent:
        pass
    elif store is not None:
        dist.init_process_group(backend, store=dist.PrefixStore("pg", store), rank=rank, world_size=world_size,
                                **group_options)
    else:  # under a torchrun of the user's own: its rendezvous, its store
        dist.init_process_group(backend, **group_options)
        store = dist.distributed_c10d._get_default_store()
    ctx = RankContext(rank=rank, world_size=world_size, local_rank=local_rank, local_world_size=local_world,
                      node_rank=_env_int("GROUP_RANK", 0), device=device, backend=backend,
                      progress=ProgressReporter(store, rank, bus_id, os.getpid()),
                      options=RankOptions(**spec["options"]), gpu_bus_id=bus_id, gpu_uuid=uuid, gpu_name=name,
                      store=store, gpu_users=users_of_gpu)
    return ctx, independent


def _run_workloads(ctx: RankContext, workloads: list[str], result: dict[str, Any], hooks: Hooks) -> None:
    """Each workload in turn, its result stored as it ends (a later hang keeps it); one that raises stores its error,
    posts `failed` and ends the process (exit 3): its peers would wait forever in their next collective."""
    functions = workload_functions()
    store, key = ctx.store, RESULT_KEY.format(rank=ctx.rank)
    current = [""]

    def publish_partial(partial: dict) -> None:
        store.set(key, json.dumps({**result, "workloads": {**result["workloads"],
                                                           current[0]: {**partial, "partial": True}}}))
    ctx.publish_partial = publish_partial
    for workload in workloads:
        current[0] = workload
        if workload in GPU_ONLY and not ctx.is_cuda:
            continue
        began = time.monotonic()
        try:
            result["workloads"][workload] = functions[workload](ctx)
            result["workload_s"][workload] = round(time.monotonic() - began, 2)
        except Exception as error:
            result["workloads"][workload] = {"error": f"{type(error).__name__}: {error}",
                                             "traceback": traceback.format_exc(limit=8)}
            store.set(key, json.dumps(result))
            ctx.progress.post("failed", workload)
            traceback.print_exc()
            sys.stdout.flush()
            if hooks.on_failed is not None:
                hooks.on_failed(store)
            os._exit(WORKLOAD_FAILED_EXIT)
        store.set(key, json.dumps(result))
    store.set(key, json.dumps(result))


def _finish(dist: Any, ctx: RankContext, hooks: Hooks) -> None:
    """The end, watched like any operation: a rank stuck in the final barrier or in destroy_process_group is named,
    not waited for."""
    timeout_s = ctx.options.timeout_s
    ctx.step("finishing", said("op.results_stored"))
    # A second post: the ranks that arrived at the barrier are one operation ahead of one that never did.
    ctx.progress.post("finishing", said("op.final_barrier"), timeout_s)
    try:
        dist.barrier()
        if hooks.on_done:
            hooks.on_done(ctx.store)
        dist.barrier()
        ctx.progress.post("finishing", "destroy_process_group", timeout_s)
        dist.destroy_process_group()
    except Exception as error:  # a peer left after its results were stored: say so in this rank's log
        print(f"gpuready: the final barrier failed ({type(error).__name__}: {error})", flush=True)


def set_operation_timeout(dist: Any, timeout: timedelta) -> None:
    """After start-up: the per-operation timeout for the default group (torchtitan's set_pg_timeouts does the same).
    `_set_pg_timeout` is private (torch >= 2.3); without it the start-up timeout stays, which only waits longer."""
    setter = getattr(dist.distributed_c10d, "_set_pg_timeout", None)
    if setter is None:
        return
    try:
        setter(timeout, None)
    except Exception:
        pass


def operation_timeout_s(dist: Any, device: Any) -> float | None:
    """The default group's timeout as its backend holds it (None where this torch does not say)."""
    try:
        backend = dist.distributed_c10d._get_default_group()._get_backend(device)
        return backend.options._timeout.total_seconds()
    except Exception:
        return None


def own_gpu_users(bus_id: str | None) -> dict[str, Any]:
    """Under torchrun: who else computes on this rank's GPU, read before this rank has a context there (so no
    PID matching is needed, which fails across PID namespaces). {"unknown": True} where NVML cannot say."""
    try:
        entry = read_own_gpu_users(bus_id)
    except Exception:
        entry = None
    if entry is None:
        return {"unknown": True}
    return {"index": entry.index, "bus_id": entry.bus_id, "uuid": entry.uuid, "processes": entry.processes,
            "free_bytes": entry.free_bytes}


if __name__ == "__main__":
    exit_without_teardown(main())

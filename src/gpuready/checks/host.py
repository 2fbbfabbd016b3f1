"""The host around the GPUs: memory, CPUs, NUMA affinity, /dev/shm, disk, locked memory."""

from __future__ import annotations

from gpuready.checks.registry import CheckContext, check
from gpuready.facts.units import parse_cpu_list
from gpuready.knowledge import thresholds
from gpuready.model import Finding

GIB = 2**30


def _total_vram_bytes(context: CheckContext) -> int:
    return sum(gpu.memory_total_bytes or 0 for gpu in context.gpus)


@check("host.memory_ratio", "System RAM against total VRAM", needs=("host.memory_total_bytes",))
def host_memory_ratio(context: CheckContext) -> list[Finding]:
    limit = thresholds("host_memory_ratio")
    host = context.facts.host
    vram = _total_vram_bytes(context)
    if not vram:
        return [context.skip("GPU memory sizes are not known.")]
    ram, what = host.memory_total_bytes, "system RAM"
    if host.cgroup_memory_limit_bytes and host.cgroup_memory_limit_bytes < ram:
        ram, what = host.cgroup_memory_limit_bytes, "the container's memory limit"
    ratio = ram / vram
    observed = f"{ram / GIB:,.0f} GiB {what} / {vram / GIB:,.0f} GiB VRAM = {ratio:.2f}×"
    expected = f">= {limit['warn_below']}×"
    fix = ("Add system memory (or raise the container's memory limit) to at least "
           f"{limit['warn_below'] * vram / GIB:,.0f} GiB; until then keep DataLoader workers and pinned buffers small, "
           "and avoid CPU offload (ZeRO-Offload / FSDP CPU offload).")
    if ratio < limit["fail_below"]:
        return [context.fail(f"{what[0].upper() + what[1:]} is only {ratio:.2f}× the total GPU memory: loading a checkpoint "
                             "that fills the GPUs will not fit in host memory.", observed=observed,
                             expected=expected, fix=fix, refs=[limit["source"]])]
    if ratio < limit["warn_below"]:
        return [context.warn(f"{what[0].upper() + what[1:]} is {ratio:.2f}× the total GPU memory, below the "
                             f"{limit['warn_below']}× rule of thumb: checkpoint loading, pinned-memory data loaders "
                             "and CPU offload may run out of host memory.", observed=observed, expected=expected,
                             fix=fix, refs=[limit["source"]])]
    return [context.passed(f"{what[0].upper() + what[1:]} is {ratio:.2f}× the total GPU memory.", observed=observed,
                           expected=expected, refs=[limit["source"]])]


@check("host.cpu_per_gpu", "CPU cores per GPU", needs=("host.cpu_count",))
def host_cpu_per_gpu(context: CheckContext) -> list[Finding]:
    limit = thresholds("host_cpu_per_gpu")
    host = context.facts.host
    # The container's share: the fewest of the host's CPUs, its cpuset and its CPU quota (quota / period).
    cpus, what = float(host.cpu_count), "logical CPUs"
    if host.cgroup_cpuset_count and host.cgroup_cpuset_count < cpus:
        shown = host.cgroup_cpuset if len(host.cgroup_cpuset or "") <= 40 else f"{host.cgroup_cpuset[:37]}..."
        cpus, what = float(host.cgroup_cpuset_count), f"CPUs in the container's cpuset ({shown})"
    if host.cgroup_cpu_limit and host.cgroup_cpu_limit < cpus:
        cpus, what = host.cgroup_cpu_limit, "CPUs allowed by the container's CPU quota"
    per_gpu = cpus / len(context.gpus)
    observed = f"{cpus:g} {what} / {len(context.gpus)} GPU(s) = {per_gpu:.1f}"
    if per_gpu < limit["warn_below"]:
        return [context.warn(f"Only {per_gpu:.1f} {what} per GPU: data loading and the Python side of each rank "
                             "will starve the GPUs.", observed=observed, expected=f">= {limit['warn_below']}",
                             fix="Give the job more CPUs (container/Slurm --cpus-per-task), or keep DataLoader "
                                 "num_workers <= cores per GPU - 1.", refs=[limit["source"]])]
    return [context.passed(f"{per_gpu:.1f} {what} per GPU.", observed=observed, expected=f">= {limit['warn_below']}",
                           refs=[limit["source"]])]


@check("host.numa_affinity", "CPUs and NUMA node near each GPU")
def host_numa_affinity(context: CheckContext) -> list[Finding]:
    topology = context.facts.topology
    affinity: dict[str, dict[str, str]] = {}
    for gpu in context.gpus:
        cpus = gpu.cpu_affinity or (topology.cpu_affinity.get(gpu.index) if topology else None)
        numa = gpu.numa_node if gpu.numa_node is not None else \
            (topology.numa_affinity.get(gpu.index) if topology else None)
        if cpus or numa is not None:
            affinity[f"GPU{gpu.index}"] = {"cpus": cpus or "?", "numa_node": str(numa) if numa is not None else "?"}
    if not affinity:
        return [context.skip("No CPU/NUMA affinity reported (nvml.json or nvidia-smi-topo.txt holds it).")]
    nodes = {entry["numa_node"] for entry in affinity.values()} - {"?", "N/A"}
    summary = "; ".join(f"{gpu}: CPUs {entry['cpus']}, NUMA {entry['numa_node']}" for gpu, entry in affinity.items())
    cpu_sets = [cpus for entry in affinity.values() if (cpus := _cpu_set(entry["cpus"])) is not None]
    note = ""
    if len(nodes) > 1:
        note = (" Pin each rank to its GPU's node (torchrun --numa-binding=node on torch >= 2.8, or "
                "`numactl --cpunodebind=N --membind=N`).")
    elif cpu_sets and all(len(cpus) == len(cpu_sets[0]) for cpus in cpu_sets):
        note = " All GPUs share one NUMA node: no pinning needed."
    return [context.passed(f"GPU affinity: {summary}.{note}", observed=affinity,
                           refs=["nvidia-smi topo -m (CPU/NUMA Affinity)"])]


def _cpu_set(cpus: str) -> set[int] | None:
    """The CPUs of an affinity list; None for `?`, `N/A` or a list that does not parse (bounded: < 2^16 CPUs)."""
    try:
        return parse_cpu_list(cpus)
    except ValueError:
        return None


@check("host.shm", "/dev/shm size", needs=("host.shm_total_bytes",))
def host_shm(context: CheckContext) -> list[Finding]:
    limit = thresholds("host_shm")
    shm, count = context.facts.host.shm_total_bytes, len(context.gpus)
    observed = f"{shm / 2**20:,.0f} MiB"
    fix = ("Docker: `--shm-size=16g` (or `--ipc=host`); Kubernetes: mount an emptyDir with medium: Memory at "
           "/dev/shm; bare metal: `sudo mount -o remount,size=50% /dev/shm`.")
    if count >= 2 and shm < limit["fail_below_bytes"]:
        return [context.fail(f"/dev/shm is {observed}: NCCL's shared-memory transport and DataLoader workers fail "
                             "with 'Bus error' or 'unable to allocate shared memory'.", observed=observed,
                             expected=f">= {limit['warn_below_bytes_per_gpu'] * count / 2**30:g} GiB", fix=fix,
                             refs=[limit["source"]])]
    if shm < limit["warn_below_bytes_per_gpu"] * count:
        return [context.warn(f"/dev/shm is {observed} for {count} GPU(s), below 1 GiB per GPU: multi-worker data "
                             "loading may fail.", observed=observed,
                             expected=f">= {limit['warn_below_bytes_per_gpu'] * count / 2**30:g} GiB", fix=fix,
                             refs=[limit["source"]])]
    return [context.passed(f"/dev/shm is {shm / 2**30:,.1f} GiB.", observed=observed, refs=[limit["source"]])]


@check("host.disk", "Free disk space", needs=("host.disks",))
def host_disk(context: CheckContext) -> list[Finding]:
    limit = thresholds("host_disk")
    disks = [disk for disk in context.facts.host.disks if disk.size_bytes > 0 and disk.mount not in ("/dev/shm",)
             and not disk.mount.startswith(("/proc", "/sys", "/dev", "/run", "/boot", "/snap", "/mnt/sandboxing"))
             and disk.filesystem not in ("tmpfs", "devtmpfs", "overlay_ro")]
    low = [disk for disk in disks
           if disk.available_bytes < limit["warn_below_bytes"]
           and disk.available_bytes < disk.size_bytes * limit["warn_below_fraction"]]
    if low:
        described = ", ".join(f"{disk.mount} {disk.available_bytes / 1e9:,.0f} GB free of {disk.size_bytes / 1e9:,.0f} GB"
                              for disk in low)
        return [context.warn(f"Little free space: {described}; checkpoints will fail to save.", observed=described,
                             expected=f">= {limit['warn_below_bytes'] / 1e9:g} GB or "
                                      f"{limit['warn_below_fraction']:.0%} free",
                             fix="Free space (`du -xsh /* | sort -h`), or point checkpoints at a larger volume.",
                             refs=[limit["source"]])]
    root = next((disk for disk in disks if disk.mount == "/"), disks[0] if disks else None)
    detail = f" ({root.mount}: {root.available_bytes / 1e9:,.0f} GB free)" if root else ""
    return [context.passed(f"Enough free disk space{detail}.", refs=[limit["source"]])]


@check("host.memlock", "Locked-memory limit for RDMA", needs=("host.memlock_limit_bytes",), needs_gpus=False)
def host_memlock(context: CheckContext) -> list[Finding]:
    limit = context.facts.host.memlock_limit_bytes
    if limit == -1:
        return [context.passed("Locked memory (ulimit -l) is unlimited.")]
    if not context.facts.ib_ports:
        return [context.passed(f"Locked memory is limited to {limit // 1024:,} KiB; no RDMA device here, so this "
                               "only matters once InfiniBand/RoCE is used.", observed=f"{limit // 1024} KiB")]
    return [context.warn(f"Locked memory is limited to {limit // 1024:,} KiB: RDMA (InfiniBand/RoCE) registration "
                         "and large pinned buffers fail.", observed=f"{limit // 1024} KiB", expected="unlimited",
                         fix="Set `* - memlock unlimited` in /etc/security/limits.conf (or docker `--ulimit "
                             "memlock=-1`, Slurm PropagateResourceLimits).",
                         refs=["NCCL troubleshooting (Docker, memlock): https://docs.nvidia.com/deeplearning/nccl/"
                               "user-guide/docs/troubleshooting.html"])]

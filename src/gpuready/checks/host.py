"""The host around the GPUs: memory, CPUs, NUMA affinity, /dev/shm, disk, locked memory."""

from __future__ import annotations

from gpuready.checks.log_evidence import quote
from gpuready.checks.registry import CheckContext, check
from gpuready.facts.units import parse_cpu_list
from gpuready.i18n import said
from gpuready.knowledge import thresholds
from gpuready.model import Finding

GIB = 2**30


def _total_vram_bytes(context: CheckContext) -> int:
    return sum(gpu.memory_total_bytes or 0 for gpu in context.gpus)


@check("host.memory_ratio", needs=("host.memory_total_bytes",))
def host_memory_ratio(context: CheckContext) -> list[Finding]:
    """System RAM against total VRAM."""
    limit = thresholds("host_memory_ratio")
    host = context.facts.host
    vram = _total_vram_bytes(context)
    if not vram:
        return [context.skip(said("host.memory_ratio.no_vram"))]
    ram, what, key = host.memory_total_bytes, "system RAM", "ram"
    if host.cgroup_memory_limit_bytes and host.cgroup_memory_limit_bytes < ram:
        ram, what, key = host.cgroup_memory_limit_bytes, "the container's memory limit", "limit"
    ratio = ram / vram
    observed = f"{ram / GIB:,.0f} GiB {what} / {vram / GIB:,.0f} GiB VRAM = {ratio:.2f}×"
    expected = f">= {limit['warn_below']}×"
    needed_gib = limit["warn_below"] * vram / GIB
    if ratio < limit["fail_below"]:
        return [context.fail(said(f"host.memory_ratio.fail_{key}", ratio=ratio, needed_gib=needed_gib),
                             observed=observed, expected=expected, refs=[limit["source"]])]
    if ratio < limit["warn_below"]:
        return [context.warn(said(f"host.memory_ratio.low_{key}", ratio=ratio, warn_below=limit["warn_below"],
                                  needed_gib=needed_gib), observed=observed, expected=expected, refs=[limit["source"]])]
    return [context.passed(said(f"host.memory_ratio.pass_{key}", ratio=ratio), observed=observed,
                           expected=expected, refs=[limit["source"]])]


@check("host.cpu_per_gpu", needs=("host.cpu_count",))
def host_cpu_per_gpu(context: CheckContext) -> list[Finding]:
    """CPU cores per GPU."""
    limit = thresholds("host_cpu_per_gpu")
    host = context.facts.host
    # The container's share: the fewest of the host's CPUs, its cpuset and its CPU quota (quota / period).
    cpus, what, key, values = float(host.cpu_count), "logical CPUs", "host", {}
    if host.cgroup_cpuset_count and host.cgroup_cpuset_count < cpus:
        shown = host.cgroup_cpuset if len(host.cgroup_cpuset or "") <= 40 else f"{host.cgroup_cpuset[:37]}..."
        cpus, what, key = float(host.cgroup_cpuset_count), f"CPUs in the container's cpuset ({shown})", "cpuset"
        values = {"cpuset": shown}
    if host.cgroup_cpu_limit and host.cgroup_cpu_limit < cpus:
        cpus, what, key, values = host.cgroup_cpu_limit, "CPUs allowed by the container's CPU quota", "quota", {}
    per_gpu = cpus / len(context.gpus)
    observed = f"{cpus:g} {what} / {len(context.gpus)} GPU(s) = {per_gpu:.1f}"
    if per_gpu < limit["warn_below"]:
        return [context.warn(said(f"host.cpu_per_gpu.low_{key}", per_gpu=per_gpu, **values), observed=observed,
                             expected=f">= {limit['warn_below']}", refs=[limit["source"]])]
    return [context.passed(said(f"host.cpu_per_gpu.pass_{key}", per_gpu=per_gpu, **values), observed=observed,
                           expected=f">= {limit['warn_below']}", refs=[limit["source"]])]


@check("host.numa_affinity")
def host_numa_affinity(context: CheckContext) -> list[Finding]:
    """CPUs and NUMA node near each GPU."""
    topology = context.facts.topology
    affinity: dict[str, dict[str, str]] = {}
    for gpu in context.gpus:
        cpus = gpu.cpu_affinity or (topology.cpu_affinity.get(gpu.index) if topology else None)
        numa = gpu.numa_node if gpu.numa_node is not None else \
            (topology.numa_affinity.get(gpu.index) if topology else None)
        if cpus or numa is not None:
            affinity[f"GPU{gpu.index}"] = {"cpus": cpus or "?", "numa_node": str(numa) if numa is not None else "?"}
    if not affinity:
        return [context.skip(said("host.numa_affinity.unreported"))]
    nodes = {entry["numa_node"] for entry in affinity.values()} - {"?", "N/A"}
    summary = "; ".join(f"{gpu}: CPUs {entry['cpus']}, NUMA {entry['numa_node']}" for gpu, entry in affinity.items())
    cpu_sets = [cpus for entry in affinity.values() if (cpus := _cpu_set(entry["cpus"])) is not None]
    distinct = {frozenset(cpus) for cpus in cpu_sets}
    variant = "pass"
    if len(nodes) > 1 or len(distinct) > 1 and sum(map(len, distinct)) == len(frozenset().union(*distinct)):
        variant = "pass_nodes"  # NUMA nodes named, or CPU lists that do not overlap (GPUs on different sockets)
    elif len(distinct) == 1:
        variant = "pass_one_node"
    return [context.passed(said(f"host.numa_affinity.{variant}", affinity=summary), observed=affinity,
                           refs=["nvidia-smi topo -m (CPU/NUMA Affinity)"])]


def _cpu_set(cpus: str) -> set[int] | None:
    """The CPUs of an affinity list; None for `?`, `N/A` or a list that does not parse (bounded: < 2^16 CPUs)."""
    try:
        return parse_cpu_list(cpus)
    except ValueError:
        return None


def _shm_in_logs(context: CheckContext) -> list[Finding]:
    """DataLoader workers that ran out of /dev/shm (a bus error, `No space left on device`): the same size, as the
    job met it. NCCL's own shared-memory failures are nccl.shm_too_small's."""
    host = context.facts.logs.host
    if host is None or not host.shm:
        return []
    kinds = sorted({shm.kind for shm, _ in host.shm})
    pids = sorted({shm.pid for shm, _ in host.shm if shm.pid is not None})
    paths = sorted({shm.path for shm, _ in host.shm if shm.path})[:4]
    text = said("host.shm.too_small" + (".one_line" if host.shm_lines == 1 else ""), lines=host.shm_lines,
                what=[said(f"host.shm.kind.{kind}") for kind in kinds])  # bus_error, no_space, write_failed
    return [context.fail(text, observed={"kinds": kinds, "worker_pids": pids, "files": paths, "lines": host.shm_lines},
                         expected="/dev/shm large enough for num_workers × prefetch_factor batches (several GiB)",
                         refs=[thresholds("host_shm")["source"],
                               "pytorch/pytorch#5040 (Bus error when /dev/shm is full)"],
                         evidence=quote([line for _, line in host.shm]))]


@check("host.shm", needs=("host.shm_total_bytes",), logs=_shm_in_logs)
def host_shm(context: CheckContext) -> list[Finding]:
    """/dev/shm size."""
    limit = thresholds("host_shm")
    shm, count = context.facts.host.shm_total_bytes, len(context.gpus)
    observed = f"{shm / 2**20:,.0f} MiB"
    if count >= 2 and shm < limit["fail_below_bytes"]:
        return [context.fail(said("host.shm.fail", shm_mib=shm / 2**20), observed=observed,
                             expected=f">= {limit['warn_below_bytes_per_gpu'] * count / 2**30:g} GiB",
                             refs=[limit["source"]])]
    if shm < limit["warn_below_bytes_per_gpu"] * count:
        return [context.warn(said("host.shm.low", shm_mib=shm / 2**20, count=count), observed=observed,
                             expected=f">= {limit['warn_below_bytes_per_gpu'] * count / 2**30:g} GiB",
                             refs=[limit["source"]])]
    return [context.passed(said("host.shm.pass", shm_gib=shm / 2**30), observed=observed, refs=[limit["source"]])]


@check("host.disk", needs=("host.disks",))
def host_disk(context: CheckContext) -> list[Finding]:
    """Free disk space."""
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
        text = said("host.disk.low", disks=described) if len(low) > 1 else \
            said("host.disk.low_one", mount=low[0].mount, free_gb=low[0].available_bytes / 1e9,
                 size_gb=low[0].size_bytes / 1e9)
        return [context.warn(text, observed=described,
                             expected=f">= {limit['warn_below_bytes'] / 1e9:g} GB or "
                                      f"{limit['warn_below_fraction']:.0%} free", refs=[limit["source"]])]
    root = next((disk for disk in disks if disk.mount == "/"), disks[0] if disks else None)
    text = said("host.disk.pass", mount=root.mount, free_gb=root.available_bytes / 1e9) if root else \
        said("host.disk.pass_no_disk")
    return [context.passed(text, refs=[limit["source"]])]


@check("host.memlock", needs=("host.memlock_limit_bytes",), needs_gpus=False)
def host_memlock(context: CheckContext) -> list[Finding]:
    """Locked-memory limit for RDMA."""
    limit = context.facts.host.memlock_limit_bytes
    if limit == -1:
        return [context.passed(said("host.memlock.unlimited"))]
    if not context.facts.ib_ports:
        return [context.passed(said("host.memlock.no_rdma", limit_kib=limit // 1024), observed=f"{limit // 1024} KiB")]
    return [context.warn(said("host.memlock.limited", limit_kib=limit // 1024), observed=f"{limit // 1024} KiB",
                         expected="unlimited",
                         refs=["NCCL troubleshooting (Docker, memlock): https://docs.nvidia.com/deeplearning/nccl/"
                               "user-guide/docs/troubleshooting.html"])]

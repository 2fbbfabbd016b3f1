"""GPU inventory: present, lost, models alike, visible devices, modes, busy."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from gpuready.checks.cuda_fault import lost_gpu_in_torch_logs
from gpuready.checks.kernel_judge import fallen_off_bus_xid
from gpuready.checks.log_evidence import quote
from gpuready.checks.registry import CheckContext, check, kernel_evidence, per_gpu, queried
from gpuready.facts.types import GpuFacts, GpuProcess, KernelEvent
from gpuready.i18n import said
from gpuready.knowledge import gpu_spec, thresholds
from gpuready.model import Finding

_TOOLKIT_REF = "NVIDIA libnvidia-container (nvidia-container-cli: `initialization error: %s`)"
_NVIDIA_SMI_REF = "nvidia-smi(1) manual, https://docs.nvidia.com/deploy/nvidia-smi/index.html"
# What a failed probe's error says -> the cause and fix in the catalogue (gpu.present.unusable_<key>).
_PROBE_CAUSES = {
    "mismatch": "mismatch",
    "couldn't communicate": "no_module",
    "driver not loaded": "not_loaded",
    "library not found": "no_library",
    "not found": "no_smi",
    "failed to initialize nvml: unknown error": "nvml_unknown",
    "no devices were found": "no_devices",
    "load library failed": "no_library",
}


def _probe_cause(error: str) -> str:
    lowered = error.lower()
    return next((cause for marker, cause in _PROBE_CAUSES.items() if marker in lowered), "unknown")


def _present_in_logs(context: CheckContext) -> list[Finding]:
    """diagnose: the container toolkit could not reach the host's driver (`nvidia-container-cli: initialization
    error: nvml error: driver not loaded`), where no capture of the driver's own already says why."""
    host = context.facts.logs.host if context.facts.logs is not None else None
    if host is None or not host.toolkit_errors or context.facts.gpu_probe_error is not None:
        return []
    error, line = host.toolkit_errors[-1]
    return [context.fail(said(f"gpu.present.unusable_{_probe_cause(error)}", error=error), observed=error,
                         expected="the driver reachable", refs=[_NVIDIA_SMI_REF, _TOOLKIT_REF],
                         evidence=quote([line for _, line in host.toolkit_errors]))]


@check("gpu.present", needs_gpus=False, logs=_present_in_logs)
def gpu_present(context: CheckContext) -> list[Finding]:
    """Driver loaded, GPUs visible."""
    facts, expected = context.facts, context.options.expect_gpus
    refused = [event for event in facts.kernel_log or [] if event.kind == "api_mismatch" and event.superseded_by is None]
    if refused and facts.gpu_probe_error is None and not any(_answers_the_driver(gpu) for gpu in facts.gpus or []):
        return [context.fail(said("gpu.present.refused", detail=refused[-1].detail), observed=refused[-1].detail,
                             expected="one driver version", refs=[_NVIDIA_SMI_REF],
                             evidence=kernel_evidence(refused))]
    if facts.gpus is None and facts.gpu_probe_error is None:
        return [context.skip(said("gpu.present.no_source"))]
    if not facts.gpus:
        error = facts.gpu_probe_error
        if error is None and facts.gpus_announced is None and facts.driver_version:
            # The driver answered (its header is here) but the capture ends before its GPU list, and nothing says
            # how many it sees: nvidia-smi prints "No devices were found" (or -q "Attached GPUs : 0") for none.
            return [context.passed(said("gpu.present.driver_only", driver=facts.driver_version,
                                        cuda=facts.cuda_driver_version or "?"),
                                   observed={"driver": facts.driver_version, "gpus": None},
                                   expected=expected or ">= 1", refs=[_NVIDIA_SMI_REF])]
        text = said(f"gpu.present.unusable_{_probe_cause(error)}", error=error) if error else said("gpu.present.no_gpu")
        return [context.fail(text, observed=0, expected=expected or ">= 1", refs=[_NVIDIA_SMI_REF])]
    count = len(facts.gpus)
    models = ", ".join(f"{n}× {name}" for name, n in Counter(gpu.name or "unknown" for gpu in facts.gpus).items())
    findings = []
    if expected is not None and count != expected:
        findings.append(context.fail(said("gpu.present.count", count=count, expected=expected, models=models),
                                     observed=count, expected=expected, refs=["--expect-gpus"]))
    elif facts.gpus_announced is not None and facts.gpus_announced > count:
        findings.append(context.warn(said("gpu.present.cut_short", announced=facts.gpus_announced, count=count),
                                     observed=count, expected=facts.gpus_announced))
    else:
        sources = _named_by(facts.gpus)
        values = {"count": count, "models": models, "driver": facts.driver_version or "?",
                  "cuda": facts.cuda_driver_version or "?"}
        text = said("gpu.present.pass_host_only", sources=sources, **values) if sources else \
            said("gpu.present.pass", **values)
        findings.append(context.passed(text, observed=count, expected=expected))
    return findings


# Files that list the host's GPUs whatever the container was given: lspci and the kernel log are not namespaced.
NOT_NAMESPACED_SOURCES = ("lspci-vv.txt", "dmesg.txt")
# Sources that name GPUs without asking the driver whether it can use them.
_HOST_ONLY_SOURCES = NOT_NAMESPACED_SOURCES + ("nvidia-smi-topo.txt", "nvidia-smi-nvlink-s.txt")


def _named_by(gpus: list[GpuFacts]) -> str | None:
    """The files that name the GPUs, where none of them asks the driver (else None)."""
    sources = sorted({source for gpu in gpus for source in gpu.source_files()})
    if sources and all(source in _HOST_ONLY_SOURCES for source in sources):
        return ", ".join(sources)
    return None


@check("gpu.lost", needs_gpus=False, logs=lost_gpu_in_torch_logs)
def gpu_lost(context: CheckContext) -> list[Finding]:
    """Every GPU answers."""
    logged = _lost_in_logs(context)
    if not any(_answers_the_driver(gpu) for gpu in context.gpus):
        return logged or [context.skip(said("gpu.lost.not_asked"))]
    findings = logged
    for gpu in context.gpus:
        if gpu.lost:
            text = said("gpu.lost.fields", name=gpu.name or "GPU", where=_where(gpu),
                        fields=", ".join(gpu.error_fields)) if gpu.error_fields else \
                said("gpu.lost.lost", name=gpu.name or "GPU", where=_where(gpu))
            findings.append(context.fail(text, gpu=gpu, observed=gpu.error_fields or "lost", expected="readable",
                                         refs=[_NVIDIA_SMI_REF]))
        elif gpu.error_fields:
            findings.append(context.passed(said("gpu.lost.transient", name=gpu.name or "GPU", where=_where(gpu),
                                                count=len(gpu.error_fields), fields=", ".join(gpu.error_fields)),
                                           gpu=gpu, observed=gpu.error_fields))
    missing = _gpus_missing_from_lspci(context)
    if not missing:
        return findings
    allocated = allocation(context)
    listed = ", ".join(missing)
    if allocated.partial:
        findings.append(context.passed(
            said("gpu.lost.not_allocated", count=len(missing), listed=listed, allocated=len(context.gpus),
                 container=allocated.container, evidence="; ".join(allocated.evidence)),
            observed={"not_allocated": missing, "container": allocated.container, "evidence": allocated.evidence},
            refs=["lspci -vv", "NVIDIA Container Toolkit: NVIDIA_VISIBLE_DEVICES, "
                  "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html"]))
    elif allocated.container:
        findings.append(context.warn(
            said("gpu.lost.missing_in_container", count=len(missing), listed=listed, container=allocated.container),
            observed={"missing": missing, "container": allocated.container, "evidence": allocated.evidence},
            expected="every GPU of the host visible", refs=["lspci -vv"]))
    else:
        findings.append(context.fail(said("gpu.lost.missing", count=len(missing), listed=listed),
                                     observed=missing, expected="every GPU visible to the driver", refs=["lspci -vv"]))
    return findings


def _where(gpu: GpuFacts) -> str:
    return gpu.bus_id or f"index {gpu.index}"


def _answers_the_driver(gpu: GpuFacts) -> bool:
    return any(source not in _HOST_ONLY_SOURCES and source != "nvidia-smi-L.txt" for source in gpu.source_files())


def lost_gpu_events(events: Iterable[KernelEvent]) -> list[KernelEvent]:
    """The one "GPU lost" judgement of what programs and the kernel said (gpu.lost, and burn of a worker's exception):
    NVML's GPU_IS_LOST or a device handle it cannot get, and a GPU fallen off the bus (its line, or the Xid xid.toml
    names for it); not an event before a later driver load (history)."""
    fallen = fallen_off_bus_xid()
    return [event for event in events if event.superseded_by is None and (
        event.kind in ("gpu_lost", "fallen_off_bus") or (event.kind == "xid" and event.code == fallen))]


def _lost_in_logs(context: CheckContext) -> list[Finding]:
    """NVML's "GPU is lost" (or a device handle it cannot get) in a program's output, for GPUs no listing already
    shows lost; before a later driver load it is history. A GPU fallen off the bus is lost too, but health.xid
    reports it (as its Xid)."""
    known = {gpu.bus_id for gpu in context.gpus if gpu.lost and gpu.bus_id}
    events = [event for event in lost_gpu_events(context.facts.kernel_log or []) if event.kind == "gpu_lost"
              and (event.bus_id is None or event.bus_id not in known)]
    if not events:
        return []
    gpu = next((gpu for gpu in context.gpus if events[-1].bus_id and gpu.bus_id == events[-1].bus_id), None)
    text = said("gpu.lost.nvml_bus", bus_id=events[-1].bus_id, lines=len(events)) if events[-1].bus_id else \
        said("gpu.lost.nvml_unnamed", lines=len(events))
    return [context.fail(text, gpu=gpu, observed=events[-1].line[:200], expected="every GPU answers",
                         refs=[_NVIDIA_SMI_REF], evidence=kernel_evidence(events))]


def _gpus_missing_from_lspci(context: CheckContext) -> list[str]:
    """NVIDIA GPUs lspci lists that no driver source names. GPUs the driver names only by index (no bus id) could be
    any of them, so that many are forgiven (and then none can be named)."""
    devices = context.facts.pci_devices
    if not devices:
        return []
    known = {gpu.bus_id for gpu in context.gpus if gpu.bus_id}
    unnamed = sum(1 for gpu in context.gpus if not gpu.bus_id)
    missing = [device.address for device in devices if device.is_nvidia_gpu and device.address not in known]
    return [] if unnamed and len(missing) <= unnamed else missing




@dataclass(frozen=True)
class Allocation:
    container: str | None
    """The container (`kubernetes`, `docker`, `slurm` …) where the evidence says so; None on bare metal or unknown."""
    evidence: list[str]
    bus_ids: frozenset[str] | None
    """The GPUs given to this run, as the driver inside reports them; None where no driver source named bus ids."""
    requests_all: bool = False
    """NVIDIA_VISIBLE_DEVICES=all outside Kubernetes and Slurm (`docker run --gpus all`): every host GPU is expected."""

    @property
    def partial(self) -> bool:
        """A container that may hold only some of the host's GPUs: GPUs outside `bus_ids` are not its own."""
        return self.container is not None and self.bus_ids is not None and not self.requests_all

    def outside(self, bus_id: str | None) -> bool:
        """A GPU of the host that this container was not given (never true on bare metal)."""
        return self.partial and bus_id is not None and bus_id not in self.bus_ids


def allocation(context: CheckContext) -> Allocation:
    """Which GPUs this run was given: in a container, the ones the driver inside names; on bare metal, all."""
    facts = context.facts
    runtime, evidence = facts.container()
    container = runtime if runtime not in (None, "none") else None
    driver_named = [gpu for gpu in context.gpus
                    if any(source not in NOT_NAMESPACED_SOURCES for source in gpu.source_files())
                    or not gpu.source]
    bus_ids = frozenset(gpu.bus_id for gpu in driver_named if gpu.bus_id) if driver_named else None
    if bus_ids is not None and any(not gpu.bus_id for gpu in driver_named):
        bus_ids = None  # a GPU known only by its index could be any of the others
    visible = (facts.env or {}).get("NVIDIA_VISIBLE_DEVICES", "").strip().lower()
    requests_all = container in ("docker", "podman", "containerd", "container") and visible == "all"
    return Allocation(container=container, evidence=evidence, bus_ids=bus_ids or None, requests_all=requests_all)


@check("gpu.model_mismatch")
def gpu_model_mismatch(context: CheckContext) -> list[Finding]:
    """All GPUs alike (model, memory, VBIOS)."""
    gpus = context.gpus
    if len(gpus) < 2:
        return [context.passed(said("gpu.model_mismatch.one_gpu"))]
    if all(gpu.name is None for gpu in gpus):
        return [context.skip(said("gpu.model_mismatch.unnamed"))]
    findings = []
    for variant, key in (("models", lambda gpu: gpu.name), ("memory", lambda gpu: gpu.memory_total_bytes),
                         ("vbios", lambda gpu: gpu.vbios)):
        values = Counter(value for gpu in gpus if (value := key(gpu)) is not None)
        if len(values) > 1:
            majority = values.most_common(1)[0][0]
            odd = [gpu for gpu in gpus if key(gpu) is not None and key(gpu) != majority]
            findings.append(context.warn(
                said(f"gpu.model_mismatch.{variant}", values=", ".join(f"{n}× {v}" for v, n in values.items()),
                     odd=", ".join(f"GPU{gpu.index}" for gpu in odd)),
                observed={str(v): n for v, n in values.items()}, expected="all identical"))
    return findings or [context.passed(said("gpu.model_mismatch.pass", count=len(gpus), model=gpus[0].name))]


@check("gpu.visible_devices", needs_gpus=False)
def gpu_visible_devices(context: CheckContext) -> list[Finding]:
    """CUDA_VISIBLE_DEVICES does not hide or reorder GPUs."""
    asked = [event for event in context.facts.kernel_log or [] if event.kind == "cuda_bad_ordinal"]
    if asked:
        return [context.warn(
            said("gpu.visible_devices.bad_ordinal"), observed=asked[-1].line[:200],
            expected="one visible GPU per local rank", refs=["CUDA runtime: cudaErrorInvalidDevice"], evidence=kernel_evidence(asked))]
    if context.facts.env is None or not context.gpus:
        return [context.skip(said("gpu.visible_devices.no_env"))]
    env = context.facts.env or {}
    visible = env.get("CUDA_VISIBLE_DEVICES")
    order = env.get("CUDA_DEVICE_ORDER")
    count = len(context.gpus)
    # CUDA_DEVICE_ORDER other than PCI_BUS_ID: a note that CUDA may number GPUs unlike nvidia-smi
    note = "_order" if order != "PCI_BUS_ID" and count > 1 else ""
    if visible is None:
        return [context.passed(said(f"gpu.visible_devices.unset{note}"))]
    entries = [entry.strip() for entry in visible.split(",") if entry.strip()]
    if visible.strip() in ("", "-1", "none", "NoDevFiles"):
        return [context.fail(said("gpu.visible_devices.hides_all", visible=visible), observed=visible,
                             expected="unset or a list of GPUs")]
    numeric = [int(entry) for entry in entries if entry.isdigit()]
    if len(entries) < count:
        return [context.warn(said("gpu.visible_devices.hides_some", visible=visible, shown=len(entries), count=count),
                             observed=visible, expected=f"all {count} GPUs")]
    if numeric and numeric != sorted(numeric):
        return [context.warn(said("gpu.visible_devices.reorders", visible=visible), observed=visible,
                             expected="ascending order")]
    return [context.passed(said(f"gpu.visible_devices.pass{note}", visible=visible))]


_PERSISTENCE_REF = "https://docs.nvidia.com/deploy/driver-persistence/index.html"


_DCGM_PERSISTENCE = re.compile(r"Persistence mode for GPU (?P<gpu>\d{1,4}) is disabled")
"""DCGM's DCGM_FR_PERSISTENCE_MODE_MSG (NVIDIA/DCGM dcgm_errors.h, "Persistence mode for GPU %u is disabled."): the
note its Persistence Mode deployment test prints, as an `Info` row under a `Pass`."""


def _persistence_in_logs(context: CheckContext) -> list[Finding]:
    """`dcgmi diag` noting persistence mode off on a GPU: DCGM runs on data-center GPUs, held to persistence mode."""
    dcgm = context.facts.logs.dcgm
    found: dict[int, Finding] = {}
    for run in dcgm.runs if dcgm else []:
        for test in run.diag.tests:
            for message in test.messages:
                match = _DCGM_PERSISTENCE.search(message.text)
                if match is None or int(match.group("gpu")) in found:
                    continue
                index = int(match.group("gpu"))
                found[index] = context.warn(
                    said("gpu.persistence.off_dcgm", index=index), observed="Disabled", expected="Enabled",
                    refs=[_PERSISTENCE_REF, "NVIDIA/DCGM dcgm_errors.h DCGM_FR_PERSISTENCE_MODE_MSG"],
                    evidence=quote([run.refs[row] for row in message.rows if row < len(run.refs)]))
    return list(found.values())


def _consumer_card(gpu: GpuFacts) -> bool:
    """A consumer desktop card (GeForce, TITAN): its product name carries the brand. Workstation cards (RTX A/Ada/PRO,
    Quadro) go into servers and are held to persistence mode like data-center parts."""
    brands = thresholds("persistence")["desktop_brands"]
    return any(brand.lower() in (gpu.name or "").lower() for brand in brands)


@check("gpu.persistence", logs=_persistence_in_logs)
def gpu_persistence(context: CheckContext) -> list[Finding]:
    """Persistence mode on."""
    def judge(gpu: GpuFacts) -> Finding | None:
        if gpu.persistence_mode is not False:
            return None
        if _consumer_card(gpu):
            # a GeForce or TITAN card: a desktop keeps the driver loaded (the display uses it), and
            # persistence mode is a server setting; off is how these machines ship, not a fault
            return context.passed(said("gpu.persistence.desktop", index=gpu.index, name=gpu.name), gpu=gpu,
                                  observed="Disabled", refs=[_PERSISTENCE_REF, thresholds("persistence")["source"]])
        return context.warn(said("gpu.persistence.off", index=gpu.index), gpu=gpu, observed="Disabled",
                            expected="Enabled", refs=[_PERSISTENCE_REF])
    return per_gpu(context, judge, said("gpu.persistence.all_good"),
                   reported=lambda gpu: gpu.persistence_mode is not None,
                   unreported=said("gpu.persistence.unreported"))


@check("gpu.mig")
def gpu_mig(context: CheckContext) -> list[Finding]:
    """MIG off for whole-GPU training."""
    def judge(gpu: GpuFacts) -> Finding | None:
        if gpu.mig_enabled:
            return context.warn(said("gpu.mig.enabled", index=gpu.index), gpu=gpu, observed="Enabled",
                                expected="Disabled", refs=["https://docs.nvidia.com/datacenter/tesla/mig-user-guide/"])
        if gpu.mig_pending:
            return context.warn(said("gpu.mig.pending", index=gpu.index), gpu=gpu, observed="Pending Enabled",
                                expected="Disabled")
        return None
    return per_gpu(context, judge, said("gpu.mig.all_good"),
                   reported=lambda gpu: gpu.mig_enabled is not None or gpu.mig_pending is not None or queried(gpu),
                   unreported=said("gpu.mig.unreported"))


@check("gpu.compute_mode")
def gpu_compute_mode(context: CheckContext) -> list[Finding]:
    """Compute mode allows training."""
    def judge(gpu: GpuFacts) -> Finding | None:
        mode = (gpu.compute_mode or "").lower()
        if "prohibited" in mode:
            return context.fail(said("gpu.compute_mode.prohibited", index=gpu.index), gpu=gpu,
                                observed=gpu.compute_mode, expected="Default")
        if "exclusive" in mode:
            return context.warn(said("gpu.compute_mode.exclusive", index=gpu.index, mode=gpu.compute_mode), gpu=gpu,
                                observed=gpu.compute_mode, expected="Default")
        return None
    return per_gpu(context, judge, said("gpu.compute_mode.all_good"),
                   reported=lambda gpu: gpu.compute_mode is not None,
                   unreported=said("gpu.compute_mode.unreported"))


@check("gpu.ecc_mode")
def gpu_ecc_mode(context: CheckContext) -> list[Finding]:
    """ECC on for datacenter GPUs."""
    def judge(gpu: GpuFacts) -> Finding | None:
        spec = gpu_spec(gpu.name)
        if gpu.ecc_enabled is False and spec is not None and spec.get("datacenter"):
            return context.warn(said("gpu.ecc_mode.off", index=gpu.index, name=gpu.name), gpu=gpu, observed="Disabled",
                                expected="Enabled", refs=[spec.source])
        if gpu.ecc_pending is not None and gpu.ecc_enabled is not None and gpu.ecc_pending != gpu.ecc_enabled:
            return context.warn(said("gpu.ecc_mode.pending", index=gpu.index), gpu=gpu,
                                observed={"current": gpu.ecc_enabled, "pending": gpu.ecc_pending})
        return None
    return per_gpu(context, judge, said("gpu.ecc_mode.all_good"),
                   reported=lambda gpu: gpu.ecc_enabled is not None or gpu.ecc_pending is not None or queried(gpu),
                   unreported=said("gpu.ecc_mode.unreported"))


@check("gpu.busy")
def gpu_busy(context: CheckContext) -> list[Finding]:
    """No other compute processes on the GPUs."""
    def judge(gpu: GpuFacts) -> Finding | None:
        compute = [process for process in gpu.processes or [] if "C" in (process.kind or "C")]
        if compute:
            names = ", ".join(f"{process.name or '?'} (pid {process.pid})" for process in compute[:5])
            return context.warn(said("gpu.busy.processes", index=gpu.index, count=len(compute), names=names), gpu=gpu,
                                observed=len(compute), expected=0)
        return None
    return per_gpu(context, judge,
                   said("gpu.busy.all_good"),
                   reported=lambda gpu: gpu.processes is not None,
                   unreported=said("gpu.busy.unreported"))


_SET_DEVICE_REF = ("PyTorch DistributedDataParallel docs: each process must use its own device, "
                   "`torch.cuda.set_device(local_rank)` before any CUDA call, "
                   "https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html")


@check("ddp.ranks_share_gpu0", needs_gpus=False)
def ddp_ranks_share_gpu0(context: CheckContext) -> list[Finding]:
    """Each rank keeps to its own GPU.

    A process list where one GPU holds the contexts of processes whose work runs on other GPUs: the ranks of a job
    created CUDA contexts on the first GPU they see (no `set_device` before the first CUDA call, a checkpoint loaded
    without `map_location`), which costs that GPU memory for every rank and is a common cause of its out-of-memory."""
    table = _process_table(context)
    if table is None:
        return [context.skip(said("ddp.ranks_share_gpu0.no_processes"))]
    gpus_of: dict[int, set[int]] = {}
    for gpu_number, process in table:
        if process.pid is not None and "C" in (process.kind or "C"):
            gpus_of.setdefault(process.pid, set()).add(gpu_number)
    crowded: dict[int, list[int]] = {}
    for pid, numbers in gpus_of.items():
        if len(numbers) > 1:
            for number in numbers:
                crowded.setdefault(number, []).append(pid)
    # the GPU that holds the most processes also running elsewhere is the one every rank touched
    shared = max(crowded.items(), key=lambda item: (len(item[1]), -item[0]), default=None)
    if shared is None or len(shared[1]) < 2:
        if stray := _stray_contexts(table, gpus_of):
            return [_stray_contexts_finding(context, *stray)]
        return [context.passed(said("ddp.ranks_share_gpu0.pass", count=len(gpus_of)))]
    number, pids = shared
    extra = sum(process.used_memory_bytes or 0 for gpu_number, process in table
                if gpu_number == number and process.pid in pids and len(gpus_of[process.pid]) > 1)
    shown = ", ".join(map(str, sorted(pids)[:8])) + (" …" if len(pids) > 8 else "")
    return [context.warn(
        said("ddp.ranks_share_gpu0.shared", gpu=number, count=len(pids), pids=shown, memory_mib=extra / 2**20),
        observed={"gpu": number, "pids": sorted(pids), "memory_bytes": extra},
        expected="one GPU per rank", refs=[_SET_DEVICE_REF])]


def _stray_contexts(table: list, gpus_of: dict[int, set[int]]) -> tuple[int, GpuProcess, list[GpuProcess]] | None:
    """(GPU number, the large process, the contexts) where one GPU holds, of one program (its name as printed), one
    large compute process and at least `contexts_at_least` small ones of one size (thresholds.toml
    ddp_stray_contexts): the other ranks' contexts, where the table shows only that GPU or the ranks' own GPUs
    under other pids. Processes seen on several GPUs are the cross-GPU rule's; a size not printed is no evidence."""
    limits = thresholds("ddp_stray_contexts")
    programs: dict[tuple[int, str], list[GpuProcess]] = {}
    for gpu_number, process in table:
        if process.pid is not None and "C" in (process.kind or "C") and process.name and \
                process.used_memory_bytes is not None and len(gpus_of.get(process.pid, ())) == 1:
            programs.setdefault((gpu_number, process.name), []).append(process)
    for (gpu_number, _), processes in sorted(programs.items(), key=lambda item: (-len(item[1]), item[0])):
        by_size = sorted(processes, key=lambda process: process.used_memory_bytes)
        large, contexts = by_size[-1], by_size[:-1]
        if len(contexts) < limits["contexts_at_least"]:
            continue
        smallest, largest = contexts[0].used_memory_bytes, contexts[-1].used_memory_bytes
        if 0 < smallest and largest <= limits["context_max_bytes"] \
                and largest - smallest <= max(limits["same_size_bytes"], limits["same_size_fraction"] * largest) \
                and large.used_memory_bytes >= limits["large_at_least_times"] * largest:
            return gpu_number, large, contexts
    return None


def _stray_contexts_finding(context: CheckContext, gpu_number: int, large: GpuProcess,
                            contexts: list[GpuProcess]) -> Finding:
    pids = sorted(process.pid for process in contexts)
    memory = sum(process.used_memory_bytes for process in contexts)
    shown = ", ".join(map(str, pids[:8])) + (" …" if len(pids) > 8 else "")
    return context.warn(
        said("ddp.ranks_share_gpu0.contexts", gpu=gpu_number, count=len(contexts), name=large.name, pids=shown,
             context_mib=contexts[-1].used_memory_bytes / 2**20, memory_mib=memory / 2**20, pid=large.pid,
             large_mib=large.used_memory_bytes / 2**20),
        observed={"gpu": gpu_number, "pids": pids, "memory_bytes": memory, "large_pid": large.pid},
        expected="one GPU per rank", refs=[_SET_DEVICE_REF, thresholds("ddp_stray_contexts")["source"]])


def _process_table(context: CheckContext) -> list | None:
    """(GPU number, process) from plain nvidia-smi's Processes block, else from the per-GPU process lists."""
    if context.facts.process_table is not None:
        return context.facts.process_table
    listed = [gpu for gpu in context.gpus if gpu.processes is not None]
    if not listed:
        return None
    return [(gpu.index, process) for gpu in listed for process in gpu.processes]

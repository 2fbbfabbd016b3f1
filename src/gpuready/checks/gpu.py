"""GPU inventory: present, lost, models alike, visible devices, modes, busy."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from gpuready.checks.registry import CheckContext, check, kernel_evidence, per_gpu, queried
from gpuready.facts.types import GpuFacts
from gpuready.knowledge import gpu_spec, thresholds
from gpuready.model import Finding

_NVIDIA_SMI_REF = "nvidia-smi(1) manual, https://docs.nvidia.com/deploy/nvidia-smi/index.html"
_PROBE_FIXES = {
    "mismatch": ("The kernel module and the user-space NVIDIA libraries differ (typically after a driver "
                 "upgrade without a reboot).",
                 "Reboot, or unload and reload the module: `sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia "
                 "&& sudo modprobe nvidia`; check `cat /proc/driver/nvidia/version` against `nvidia-smi`."),
    "couldn't communicate": ("The NVIDIA kernel module is not loaded.",
                             "Check `lsmod | grep nvidia` and `dmesg | grep -i nvrm`; reinstall the driver for the "
                             "running kernel (DKMS) or boot the kernel it was built for."),
    "driver not loaded": ("The NVIDIA kernel module is not loaded.",
                          "Check `lsmod | grep nvidia` and `dmesg | grep -i nvrm`; install or rebuild the driver."),
    "library not found": ("The NVIDIA driver's user-space library (libnvidia-ml.so) is not installed.",
                          "Install the NVIDIA driver; inside a container, run it with the NVIDIA runtime "
                          "(`docker run --gpus all` / the NVIDIA device plugin)."),
    "not found": ("nvidia-smi is not installed.",
                  "Install the NVIDIA driver; inside a container, run it with the NVIDIA runtime (`--gpus all`)."),
    "failed to initialize nvml: unknown error": (
        "NVML is installed but cannot reach the GPUs. In a container that worked before, this is the container losing "
        "its access to /dev/nvidia* after a `systemctl daemon-reload` on the host (systemd cgroup driver, NVIDIA "
        "Container Toolkit known issue); on a host, the driver is in a bad state.",
        "Restart the container now. To stop it recurring: `sudo nvidia-ctk system create-dev-char-symlinks "
        "--create-all` (and its udev rule) on the host, or pass the /dev/nvidia* devices explicitly (`--device`); on "
        "a host, check `dmesg | grep -i nvrm` and reboot."),
    "no devices were found": ("The driver is loaded but sees no GPU.",
                              "Check `lspci | grep -i nvidia`, the container's device list (NVIDIA_VISIBLE_DEVICES), "
                              "and `dmesg` for GPU initialisation errors."),
}


def _probe_explanation(error: str) -> tuple[str, str]:
    lowered = error.lower()
    for marker, explanation in _PROBE_FIXES.items():
        if marker in lowered:
            return explanation
    return ("The NVIDIA driver could not be asked about its GPUs.",
            "Run `nvidia-smi` and `dmesg | grep -i nvrm` to see why.")


@check("gpu.present", "Driver loaded, GPUs visible", needs_gpus=False)
def gpu_present(context: CheckContext) -> list[Finding]:
    facts, expected = context.facts, context.options.expect_gpus
    refused = [event for event in facts.kernel_log or [] if event.kind == "api_mismatch" and event.superseded_by is None]
    if refused and facts.gpu_probe_error is None and not any(_answers_the_driver(gpu) for gpu in facts.gpus or []):
        cause, fix = _probe_explanation("mismatch")
        return [context.fail(f"The kernel module refused the NVIDIA libraries ({refused[-1].detail}): no GPU is usable "
                             f"until both are one version. {cause}", observed=refused[-1].detail,
                             expected="one driver version", fix=fix, refs=[_NVIDIA_SMI_REF],
                             evidence=kernel_evidence(refused))]
    if facts.gpus is None and facts.gpu_probe_error is None:
        return [context.skip("No GPU source in this bundle (nvml.json, nvidia-smi-q.xml/.txt or nvidia-smi.txt).")]
    if not facts.gpus:
        cause, fix = _probe_explanation(facts.gpu_probe_error or "no devices were found")
        detail = f" ({facts.gpu_probe_error})" if facts.gpu_probe_error else ""
        return [context.fail(f"No NVIDIA GPU or driver is usable on this machine{detail}. {cause}",
                             observed=0, expected=expected or ">= 1", fix=fix, refs=[_NVIDIA_SMI_REF])]
    count = len(facts.gpus)
    models = ", ".join(f"{n}× {name}" for name, n in Counter(gpu.name or "unknown" for gpu in facts.gpus).items())
    findings = []
    if expected is not None and count != expected:
        findings.append(context.fail(f"{count} GPUs visible, {expected} expected ({models}).", observed=count,
                                     expected=expected,
                                     fix="Check `lspci | grep -i nvidia`, CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES,"
                                         " and `dmesg` for GPUs that failed to initialise.",
                                     refs=["--expect-gpus"]))
    elif facts.gpus_announced is not None and facts.gpus_announced > count:
        findings.append(context.warn(
            f"The driver announces {facts.gpus_announced} GPUs but only {count} could be read: the capture may be "
            "cut short or GPUs did not answer.", observed=count, expected=facts.gpus_announced,
            fix="Collect the bundle again with `gpuready collect`; run `nvidia-smi -q` to see the missing GPUs."))
    else:
        findings.append(context.passed(f"{count} GPU(s) visible: {models}; driver {facts.driver_version or '?'}, "
                                       f"CUDA {facts.cuda_driver_version or '?'}.{_named_by(facts.gpus)}",
                                       observed=count, expected=expected))
    return findings


# Files that list the host's GPUs whatever the container was given: lspci and the kernel log are not namespaced.
NOT_NAMESPACED_SOURCES = ("lspci-vv.txt", "dmesg.txt")
# Sources that name GPUs without asking the driver whether it can use them.
_HOST_ONLY_SOURCES = NOT_NAMESPACED_SOURCES + ("nvidia-smi-topo.txt", "nvidia-smi-nvlink-s.txt")


def _named_by(gpus: list[GpuFacts]) -> str:
    sources = sorted({source for gpu in gpus for source in gpu.source_files()})
    if sources and all(source in _HOST_ONLY_SOURCES for source in sources):
        return (f" Named by {', '.join(sources)} only: whether the driver can use them is not in this input "
                "(nvidia-smi or nvml.json says).")
    return ""


@check("gpu.lost", "Every GPU answers", needs_gpus=False)
def gpu_lost(context: CheckContext) -> list[Finding]:
    logged = _lost_in_logs(context)
    if not any(_answers_the_driver(gpu) for gpu in context.gpus):
        return logged or [context.skip("Not judged: no file in this run asks the driver about the GPUs (nvml.json, "
                                       "nvidia-smi or nvidia-smi -q does).")]
    findings = logged
    for gpu in context.gpus:
        if gpu.lost:
            findings.append(context.fail(
                f"{gpu.name or 'GPU'} at {_where(gpu)} does not answer: {_error_summary(gpu)}.", gpu=gpu,
                observed=gpu.error_fields or "lost", expected="readable",
                fix="Drain the node and reboot it; if the GPU stays lost, reseat it or RMA it. "
                    "Look for Xid 79 in `dmesg` (see health.xid).", refs=[_NVIDIA_SMI_REF]))
        elif gpu.error_fields:
            findings.append(context.passed(
                f"{gpu.name or 'GPU'} at {_where(gpu)}: one field unreadable ({', '.join(gpu.error_fields)}); a single "
                "transient ERR! is noted, not failed.", gpu=gpu, observed=gpu.error_fields))
    missing = _gpus_missing_from_lspci(context)
    if not missing:
        return findings
    allocated = allocation(context)
    listed = ", ".join(missing)
    if allocated.partial:
        findings.append(context.passed(
            f"{len(missing)} GPU(s) of the host are not allocated to this container: {listed} (lspci is not "
            f"namespaced and lists the host's GPUs; the driver inside shows the {len(context.gpus)} allocated). "
            f"Container: {allocated.container} ({'; '.join(allocated.evidence)}).",
            observed={"not_allocated": missing, "container": allocated.container, "evidence": allocated.evidence},
            refs=["lspci -vv", "NVIDIA Container Toolkit: NVIDIA_VISIBLE_DEVICES, "
                  "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html"]))
    elif allocated.container:
        findings.append(context.warn(
            f"lspci lists {len(missing)} NVIDIA GPU(s) the driver does not show ({listed}), although this "
            f"{allocated.container} container asks for all GPUs (NVIDIA_VISIBLE_DEVICES=all; GPUs given as CDI "
            "devices, `--device nvidia.com/gpu=…`, leave that value as the image set it).",
            observed={"missing": missing, "container": allocated.container, "evidence": allocated.evidence},
            expected="every GPU of the host visible",
            fix="On the host, run `nvidia-smi` and `dmesg | grep -i -e nvrm -e xid` for these bus ids; if the host "
                "sees them, check the container's device list (`--gpus all`, CDI spec).", refs=["lspci -vv"]))
    else:
        findings.append(context.fail(
            f"lspci lists {len(missing)} NVIDIA GPU(s) the driver does not show: {listed}.",
            observed=missing, expected="every GPU visible to the driver",
            fix="Check `dmesg | grep -i -e nvrm -e xid` for these bus ids; reboot; reseat or RMA a GPU that stays "
                "missing. In a container, the GPUs it was not given show here too: run with `--gpus`/the device plugin "
                "and collect again from inside it (its environment and cgroup files say it is a container).",
            refs=["lspci -vv"]))
    return findings


def _where(gpu: GpuFacts) -> str:
    return gpu.bus_id or f"index {gpu.index}"


def _answers_the_driver(gpu: GpuFacts) -> bool:
    return any(source not in _HOST_ONLY_SOURCES and source != "nvidia-smi-L.txt" for source in gpu.source_files())


def _error_summary(gpu: GpuFacts) -> str:
    return "fields unreadable: " + ", ".join(gpu.error_fields) if gpu.error_fields else "reported as lost"


def _lost_in_logs(context: CheckContext) -> list[Finding]:
    """NVML's "GPU is lost" (or a device handle it cannot get) in a program's output, for GPUs no listing already
    shows lost; before a later driver load it is history."""
    known = {gpu.bus_id for gpu in context.gpus if gpu.lost and gpu.bus_id}
    events = [event for event in context.facts.kernel_log or [] if event.kind == "gpu_lost"
              and event.superseded_by is None and (event.bus_id is None or event.bus_id not in known)]
    if not events:
        return []
    gpu = next((gpu for gpu in context.gpus if events[-1].bus_id and gpu.bus_id == events[-1].bus_id), None)
    where = f"the GPU at {events[-1].bus_id}" if events[-1].bus_id else "a GPU (the line does not name it)"
    return [context.fail(f"NVML reports {where} lost ({len(events)} line(s)): the driver can no longer reach it, and "
                         "jobs on it fail.", gpu=gpu, observed=events[-1].line[:200], expected="every GPU answers",
                         fix="Drain the node and reboot it; look for Xid 79 in `dmesg`; if the GPU stays lost, reseat "
                             "it or RMA it.", refs=[_NVIDIA_SMI_REF], evidence=kernel_evidence(events))]


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


@check("gpu.model_mismatch", "All GPUs alike (model, memory, VBIOS)")
def gpu_model_mismatch(context: CheckContext) -> list[Finding]:
    gpus = context.gpus
    if len(gpus) < 2:
        return [context.passed("One GPU: nothing to compare.")]
    if all(gpu.name is None for gpu in gpus):
        return [context.skip("GPU models not in this run (nvidia-smi, nvidia-smi -q, -L or nvml.json names them).")]
    findings = []
    for label, key, fix in (
            ("models", lambda gpu: gpu.name, "Training runs at the pace of the slowest GPU: group identical GPUs per "
                                              "job (CUDA_VISIBLE_DEVICES) or replace the odd one."),
            ("memory sizes", lambda gpu: gpu.memory_total_bytes, "Batch size is limited by the smallest GPU; use "
                                                                 "identical GPUs in one job."),
            ("VBIOS versions", lambda gpu: gpu.vbios, "Update every GPU to the same VBIOS/firmware bundle from the "
                                                      "system vendor.")):
        values = Counter(value for gpu in gpus if (value := key(gpu)) is not None)
        if len(values) > 1:
            majority = values.most_common(1)[0][0]
            odd = [gpu for gpu in gpus if key(gpu) is not None and key(gpu) != majority]
            findings.append(context.warn(
                f"GPUs differ in {label}: " + ", ".join(f"{n}× {v}" for v, n in values.items())
                + f"; odd one(s): {', '.join(f'GPU{gpu.index}' for gpu in odd)}.",
                observed={str(v): n for v, n in values.items()}, expected="all identical", fix=fix))
    return findings or [context.passed(f"All {len(gpus)} GPUs are alike: {gpus[0].name}.")]


@check("gpu.visible_devices", "CUDA_VISIBLE_DEVICES does not hide or reorder GPUs", needs_gpus=False)
def gpu_visible_devices(context: CheckContext) -> list[Finding]:
    asked = [event for event in context.facts.kernel_log or [] if event.kind == "cuda_bad_ordinal"]
    if asked:
        return [context.warn(
            "A process asked CUDA for a GPU it does not see ('invalid device ordinal'): the job starts more ranks per "
            "node than the GPUs visible to it (`--nproc-per-node`, `CUDA_VISIBLE_DEVICES`, the container's or "
            "scheduler's GPU count), or indexes GPUs by global rank instead of local rank.",
            observed=asked[-1].line[:200], expected="one visible GPU per local rank",
            fix="Match `--nproc-per-node` to `nvidia-smi -L | wc -l` inside the job (or the GPUs requested from "
                "Slurm/Kubernetes); use `torch.cuda.set_device(int(os.environ['LOCAL_RANK']))`.",
            refs=["CUDA runtime: cudaErrorInvalidDevice"], evidence=kernel_evidence(asked))]
    if context.facts.env is None or not context.gpus:
        return [context.skip("Not judged: needs env (env.txt) and the GPUs, which this run does not have.")]
    env = context.facts.env or {}
    visible = env.get("CUDA_VISIBLE_DEVICES")
    order = env.get("CUDA_DEVICE_ORDER")
    count = len(context.gpus)
    notes = []
    if order != "PCI_BUS_ID" and count > 1:
        notes.append("CUDA_DEVICE_ORDER is not PCI_BUS_ID, so CUDA may number GPUs fastest-first, unlike nvidia-smi")
    if visible is None:
        return [context.passed("CUDA_VISIBLE_DEVICES is not set: all GPUs are visible to CUDA."
                               + (f" Note: {notes[0]}." if notes else ""))]
    entries = [entry.strip() for entry in visible.split(",") if entry.strip()]
    if visible.strip() in ("", "-1", "none", "NoDevFiles"):
        return [context.fail(f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU from CUDA.", observed=visible,
                             expected="unset or a list of GPUs", fix="unset CUDA_VISIBLE_DEVICES")]
    numeric = [int(entry) for entry in entries if entry.isdigit()]
    if len(entries) < count:
        return [context.warn(f"CUDA_VISIBLE_DEVICES={visible} shows {len(entries)} of {count} GPUs to CUDA.",
                             observed=visible, expected=f"all {count} GPUs",
                             fix="unset CUDA_VISIBLE_DEVICES, unless hiding GPUs is intended (a shared machine)")]
    if numeric and numeric != sorted(numeric):
        return [context.warn(f"CUDA_VISIBLE_DEVICES={visible} reorders the GPUs: cuda:0 is not GPU0.",
                             observed=visible, expected="ascending order",
                             fix="List GPUs in ascending order, and set CUDA_DEVICE_ORDER=PCI_BUS_ID")]
    return [context.passed(f"CUDA_VISIBLE_DEVICES={visible} shows every GPU in order."
                           + (f" Note: {notes[0]}." if notes else ""))]


_PERSISTENCE_REF = "https://docs.nvidia.com/deploy/driver-persistence/index.html"


@check("gpu.persistence", "Persistence mode on")
def gpu_persistence(context: CheckContext) -> list[Finding]:
    def judge(gpu: GpuFacts) -> Finding | None:
        if gpu.persistence_mode is not False:
            return None
        spec = gpu_spec(gpu.name)
        brands = thresholds("persistence")["desktop_brands"]
        desktop = not spec.get("datacenter") if spec is not None else \
            any(brand.lower() in (gpu.name or "").lower() for brand in brands)
        if desktop:
            # a GeForce or workstation card: a desktop keeps the driver loaded (the display uses it), and
            # persistence mode is a server setting; off is how these machines ship, not a fault
            return context.passed(f"Persistence mode is off on GPU{gpu.index} ({gpu.name}, not a datacenter GPU): "
                                  "usual on desktops and workstations.", gpu=gpu, observed="Disabled",
                                  fix="On a headless training box: sudo systemctl enable --now nvidia-persistenced",
                                  refs=[_PERSISTENCE_REF, thresholds("persistence")["source"]])
        return context.warn(f"Persistence mode is off on GPU{gpu.index}: the driver unloads between jobs, adding "
                            "seconds to each start and losing settings.", gpu=gpu, observed="Disabled",
                            expected="Enabled", fix="sudo systemctl enable --now nvidia-persistenced",
                            refs=[_PERSISTENCE_REF])
    return per_gpu(context, judge, "Persistence mode is on on all {count} GPU(s).",
                   reported=lambda gpu: gpu.persistence_mode is not None,
                   unreported="Persistence mode not reported (nvml.json, nvidia-smi or nvidia-smi -q holds it).")


@check("gpu.mig", "MIG off for whole-GPU training")
def gpu_mig(context: CheckContext) -> list[Finding]:
    def judge(gpu: GpuFacts) -> Finding | None:
        if gpu.mig_enabled:
            return context.warn(f"MIG is enabled on GPU{gpu.index}: CUDA sees slices, NCCL cannot span them, and "
                                "multi-GPU training needs whole GPUs.", gpu=gpu, observed="Enabled",
                                expected="Disabled", fix=f"sudo nvidia-smi -i {gpu.index} -mig 0 (then reset the GPU)",
                                refs=["https://docs.nvidia.com/datacenter/tesla/mig-user-guide/"])
        if gpu.mig_pending:
            return context.warn(f"MIG is pending enable on GPU{gpu.index} (applies at the next GPU reset).", gpu=gpu,
                                observed="Pending Enabled", expected="Disabled",
                                fix=f"sudo nvidia-smi -i {gpu.index} -mig 0")
        return None
    return per_gpu(context, judge, "MIG is off on all {count} GPU(s).",
                   reported=lambda gpu: gpu.mig_enabled is not None or gpu.mig_pending is not None or queried(gpu),
                   unreported="MIG mode not reported (nvml.json or nvidia-smi -q holds it).")


@check("gpu.compute_mode", "Compute mode allows training")
def gpu_compute_mode(context: CheckContext) -> list[Finding]:
    def judge(gpu: GpuFacts) -> Finding | None:
        mode = (gpu.compute_mode or "").lower()
        if "prohibited" in mode:
            return context.fail(f"GPU{gpu.index} is in Prohibited compute mode: no CUDA context can be created.",
                                gpu=gpu, observed=gpu.compute_mode, expected="Default",
                                fix=f"sudo nvidia-smi -i {gpu.index} -c DEFAULT")
        if "exclusive" in mode:
            return context.warn(f"GPU{gpu.index} is in {gpu.compute_mode} mode: only one process may use it, so "
                                "helpers (profilers, a second rank) fail to attach.", gpu=gpu,
                                observed=gpu.compute_mode, expected="Default",
                                fix=f"sudo nvidia-smi -i {gpu.index} -c DEFAULT (unless the scheduler wants it)")
        return None
    return per_gpu(context, judge, "Compute mode is Default on all {count} GPU(s).",
                   reported=lambda gpu: gpu.compute_mode is not None,
                   unreported="Compute mode not reported (nvml.json or nvidia-smi -q holds it).")


@check("gpu.ecc_mode", "ECC on for datacenter GPUs")
def gpu_ecc_mode(context: CheckContext) -> list[Finding]:
    def judge(gpu: GpuFacts) -> Finding | None:
        spec = gpu_spec(gpu.name)
        if gpu.ecc_enabled is False and spec is not None and spec.get("datacenter"):
            return context.warn(f"ECC is off on GPU{gpu.index} ({gpu.name}): memory errors would go undetected and "
                                "silently corrupt training.", gpu=gpu, observed="Disabled", expected="Enabled",
                                fix=f"sudo nvidia-smi -i {gpu.index} -e 1 (applies after a reboot)",
                                refs=[spec.source])
        if gpu.ecc_pending is not None and gpu.ecc_enabled is not None and gpu.ecc_pending != gpu.ecc_enabled:
            return context.warn(f"ECC mode on GPU{gpu.index} changes at the next reboot.", gpu=gpu,
                                observed={"current": gpu.ecc_enabled, "pending": gpu.ecc_pending},
                                fix="Reboot to apply the pending ECC mode.")
        return None
    return per_gpu(context, judge, "ECC is as expected on all {count} GPU(s).",
                   reported=lambda gpu: gpu.ecc_enabled is not None or gpu.ecc_pending is not None or queried(gpu),
                   unreported="ECC mode not reported (nvml.json or nvidia-smi -q holds it).")


@check("gpu.busy", "No other compute processes on the GPUs")
def gpu_busy(context: CheckContext) -> list[Finding]:
    def judge(gpu: GpuFacts) -> Finding | None:
        compute = [process for process in gpu.processes or [] if "C" in (process.kind or "C")]
        if compute:
            names = ", ".join(f"{process.name or '?'} (pid {process.pid})" for process in compute[:5])
            return context.warn(f"GPU{gpu.index} runs {len(compute)} compute process(es): {names}; a job started "
                                "now would share it.", gpu=gpu, observed=len(compute), expected=0,
                                fix=f"nvidia-smi -i {gpu.index} --query-compute-apps=pid,process_name,used_memory "
                                    "--format=csv; stop them or pick other GPUs")
        return None
    return per_gpu(context, judge,
                   "No compute processes on any of {count} GPU(s) (memory the driver reserves is not a process).",
                   reported=lambda gpu: gpu.processes is not None,
                   unreported="No process list in this run (nvml.json or nvidia-smi -q holds one).")


_SET_DEVICE_REF = ("PyTorch DistributedDataParallel docs: each process must use its own device, "
                   "`torch.cuda.set_device(local_rank)` before any CUDA call, "
                   "https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html")


@check("ddp.ranks_share_gpu0", "Each rank keeps to its own GPU", needs_gpus=False)
def ddp_ranks_share_gpu0(context: CheckContext) -> list[Finding]:
    """A process list where one GPU holds the contexts of processes whose work runs on other GPUs: the ranks of a job
    created CUDA contexts on the first GPU they see (no `set_device` before the first CUDA call, a checkpoint loaded
    without `map_location`), which costs that GPU memory for every rank and is a common cause of its out-of-memory."""
    table = _process_table(context)
    if table is None:
        return [context.skip("No process list in this run (plain nvidia-smi, nvidia-smi -q or nvml.json holds one).")]
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
        return [context.passed(f"Every compute process keeps to one GPU ({len(gpus_of)} process(es)).")]
    number, pids = shared
    extra = sum(process.used_memory_bytes or 0 for gpu_number, process in table
                if gpu_number == number and process.pid in pids and len(gpus_of[process.pid]) > 1)
    return [context.warn(
        f"GPU {number} holds contexts of {len(pids)} processes that also run on other GPUs "
        f"(pids {', '.join(map(str, sorted(pids)[:8]))}{' …' if len(pids) > 8 else ''}; {extra / 2**20:,.0f} MiB there): "
        "the job's ranks each created a CUDA context on it, so it runs out of memory before the others.",
        observed={"gpu": number, "pids": sorted(pids), "memory_bytes": extra},
        expected="one GPU per rank",
        fix="In each rank call `torch.cuda.set_device(local_rank)` (or `torch.cuda.set_device(f'cuda:{local_rank}')`) "
            "before any CUDA call and before init_process_group; load checkpoints with `map_location` to that "
            "device; pass `device_ids=[local_rank]` to DDP.", refs=[_SET_DEVICE_REF])]


def _process_table(context: CheckContext) -> list | None:
    """(GPU number, process) from plain nvidia-smi's Processes block, else from the per-GPU process lists."""
    if context.facts.process_table is not None:
        return context.facts.process_table
    listed = [gpu for gpu in context.gpus if gpu.processes is not None]
    if not listed:
        return None
    return [(gpu.index, process) for gpu in listed for process in gpu.processes]

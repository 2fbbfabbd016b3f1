"""Which GPUs a run uses and who else uses them, for every measuring verb (validate, burn, bench).

- The device and the number of ranks (`--device auto` is CUDA or an error, never a silent CPU run), bounded before
  anything starts; `--gpus` as CUDA_VISIBLE_DEVICES; the node's facts that expected figures need.
- The judge of a shared GPU: `<verb>.gpu_shared` findings, the `--exclusive` refusal, and the blame a low figure gets
  where another process computes on its GPU. Who uses which GPU is a fact (facts/gpu_users.py reads it); what that
  means for a run is judged here.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from gpuready.evidence.build import build_facts
from gpuready.evidence.collect import collect
from gpuready.facts.nvml import NvmlSession
from gpuready.facts.nvml_records import GpuIdentity
from gpuready.facts.units import normalize_bus_id
from gpuready.facts.visible import visible_nvml_indices
from gpuready.options import UsageError

from gpuready import __version__
from gpuready.facts.gpu_users import GpuUsers, shared
from gpuready.i18n import Said, Sentence, catalogue, finding_text, json_values, said, said_again, said_of, sentence
from gpuready.model import Finding, GpuRef, Report, Status, Subject
from gpuready.node import node_name

LOW_FIGURE_CHECKS = frozenset({"compute.low", "compute.straggler", "memory_bw.low", "transfer.low", "p2p.low",
                               "nccl.busbw_low", "burn.straggler", "burn.throughput_low", "burn.power_low",
                               "burn.clocks"})
"""Findings about a figure below its expectation: on a shared GPU the other process is the likely cause."""


def users_of(subject_gpu: Any, users: dict[int, GpuUsers]) -> GpuUsers | None:
    """The shared-GPU entry for a finding's GpuRef (matched by UUID, bus id, then NVML index)."""
    if subject_gpu is None:
        return None
    for entry in users.values():
        if entry.processes and ((entry.uuid and entry.uuid == getattr(subject_gpu, "uuid", None))
                                or (entry.bus_id and entry.bus_id == getattr(subject_gpu, "bus_id", None))):
            return entry
    entry = users.get(getattr(subject_gpu, "index", None))
    return entry if entry and entry.processes and not getattr(subject_gpu, "uuid", None) \
        and not getattr(subject_gpu, "bus_id", None) else None


def holders(entry: GpuUsers) -> list[Said]:
    """The other processes on one GPU, each `pid P (name) holding X GiB`, in the reader's language."""
    described = []
    for process in entry.processes:
        used = process.get("used_memory_bytes")
        held = f"{used / 2**30:,.1f} GiB" if isinstance(used, int) else said("sharing.memory_unknown")
        described.append(said("sharing.process", pid=process.get("pid"), name=process["name"], held=held)
                         if process.get("name") else said("sharing.process.unnamed", pid=process.get("pid"), held=held))
    return described


def add_note(finding: Any, msg_id: str, **values: object) -> None:
    """`finding` said again inside `msg_id` (`{judged}` and a note after it); its fix stays, in every language, by
    `<msg_id>.fix` = `{judged_fix}`. A finding outside the catalogue gets the English note appended."""
    if finding.message_id is None:
        finding.message = said(msg_id, judged=finding.message.rstrip(), **values).english()
        return
    judged = said_again(finding)
    if finding.fix is not None and f"{judged.msg_id}.fix" in catalogue("en"):
        values["judged_fix"] = Said(f"{judged.msg_id}.fix", judged.values)
    text = said(msg_id, judged=judged, **values)
    finding.message, finding.message_id, finding.message_values = \
        text.english(), text.msg_id, json_values(text.values)


def blame_sharing(findings: list[Any], users: dict[int, GpuUsers] | None) -> None:
    """Every non-pass low-figure finding on a shared GPU says the other process is the likely cause."""
    for finding in findings:
        if finding.check_id not in LOW_FIGURE_CHECKS or str(getattr(finding.status, "value", finding.status)) == "pass":
            continue
        entry = users_of(finding.subject.gpu, shared(users))
        if entry is not None:
            add_note(finding, "sharing.blamed", holders=holders(entry))


def sharing_findings(verb: str, host: str, users: dict[int, GpuUsers] | None, exclusive: bool,
                     ran: bool = True) -> list[Finding]:
    """`<verb>.gpu_shared`: warn per GPU another process uses (fail with --exclusive); pass when none does;
    skip when NVML could not say."""
    check_id = f"{verb}.gpu_shared"
    if users is None:
        return [Finding(check_id=check_id, status=Status.SKIP, subject=Subject(host=host),
                        **finding_text(said("sharing.not_checked")))]
    findings = []
    for index, entry in sorted(shared(users).items()):
        status = Status.FAIL if exclusive else Status.WARN
        findings.append(Finding(
            check_id=check_id, status=status,
            subject=Subject(host=host, gpu=GpuRef(index=index, bus_id=entry.bus_id, uuid=entry.uuid)),
            **finding_text(said("sharing.shared" if ran else "sharing.shared.refused", index=index,
                                holders=holders(entry))),
            observed=[{"pid": p.get("pid"), "name": p.get("name"), "used_memory_bytes": p.get("used_memory_bytes")}
                      for p in entry.processes],
            expected="no other compute process"))
    if not findings:
        findings.append(Finding(check_id=check_id, status=Status.PASS, subject=Subject(host=host),
                                **finding_text(said("sharing.none", count=len(users))),
                                observed=[], expected="no other compute process"))
    return findings


def exclusive_refusal(verb: str, users: dict[int, GpuUsers] | None, facts: dict[str, Any]) -> Report | None:
    """The report of a `--exclusive` run refused before anything started, because another process computes on a
    selected GPU; None where none does (or NVML cannot say: the run goes on and the report says sharing was not
    checked). `facts`: what the verb records under `facts[verb]`."""
    if not shared(users):
        return None
    host = node_name()
    report = Report(tool_version=__version__, host=host,
                    findings=sharing_findings(verb, host, users, exclusive=True, ran=False))
    report.facts[verb] = {**facts, "exclusive": True, "started": False}
    return report


class NoGpuError(Exception):
    """`--device auto` (the default) on a machine where torch sees no GPU: exit 3, never a silent CPU run."""


def no_gpu_reason(verb: str = "validate") -> Sentence:
    """One sentence: why torch sees no GPU here, and how to run on CPUs on purpose (its str() is the English)."""
    import torch  # seconds to import: only where NVML could not tell
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if getattr(torch.version, "cuda", None) is None:
        why = said("error.no_gpu.cpu_build", version=torch.__version__)
    elif hidden is not None and hidden.strip() in ("", "-1", "none", "NoDevFiles"):
        why = said("error.no_gpu.hidden", value=repr(hidden))
    elif hidden is not None:
        why = said("error.no_gpu.no_driver.visible", cuda=torch.version.cuda, value=repr(hidden))
    else:
        why = said("error.no_gpu.no_driver", cuda=torch.version.cuda)
    return sentence("error.no_gpu", verb=verb, why=why)


def auto_device(device: str, verb: str = "validate") -> str:
    """`auto` is `cuda`: without a GPU it raises NoGpuError (the CPU path only with --device cpu)."""
    if device != "auto":
        return device
    if gpus_cuda_shows() or _torch_sees_a_gpu():
        return "cuda"
    raise NoGpuError(no_gpu_reason(verb))


def _torch_sees_a_gpu() -> bool:
    import torch  # seconds to import: only where NVML could not tell
    return torch.cuda.is_available()


def gpus_cuda_shows() -> int:
    """How many GPUs a CUDA build of torch will show, without importing torch (seconds that the ranks then spend in
    parallel): NVML's GPUs as CUDA_VISIBLE_DEVICES selects them, where the installed torch was built for CUDA. 0
    where this cannot be told so (no NVML, MIG instances, a CPU build, an error): the caller asks torch."""
    try:
        spec = find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            return 0
        version_file = Path(next(iter(spec.submodule_search_locations))) / "version.py"
        if not re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]\d", version_file.read_text(), re.M):
            return 0  # `cuda = None`: a CPU build
        session = NvmlSession()
        try:
            gpus = list(session.identity)
        finally:
            session.close()
        chosen = visible_nvml_indices(gpus)
        return len(gpus) if chosen is None and "CUDA_VISIBLE_DEVICES" not in os.environ else len(chosen or [])
    except Exception:  # pynvml missing, no driver, a timeout: torch decides
        return 0


def _torch_gpu_count() -> int:
    import torch  # seconds to import: only where NVML could not tell
    return torch.cuda.device_count()


@dataclass(frozen=True, kw_only=True)
class DeviceRequest:
    """What a measuring verb's options ask for (validate's, burn's and bench's options have these fields too)."""
    device: str = "auto"
    """`auto` (CUDA, or an error without a GPU), `cuda` or `cpu`."""
    backend: str = "auto"
    """`gloo` lets ranks share GPUs (then bounded as CPU ranks)."""
    ranks: int | None = None
    """None: one per GPU, or 2 CPU ranks."""
    oversubscribe: bool = False
    """More CPU ranks than usable CPUs (up to OVERSUBSCRIBE_FACTOR per CPU)."""


def resolve_device(options: DeviceRequest, option: str = "--ranks") -> tuple[str, int]:
    """The device and the number of ranks, bounded before anything starts (ValueError: a usage error).

    On GPUs one rank per GPU at most (with --backend gloo ranks may share GPUs: then bounded as CPU ranks);
    on CPUs one rank per usable CPU, or up to runner.OVERSUBSCRIBE_FACTOR per CPU with --oversubscribe.
    """
    device = auto_device(options.device)
    if device == "cuda":
        count = gpus_cuda_shows() or _torch_gpu_count()
        if count == 0:
            raise RuntimeError(sentence("error.cuda.none"))
        ranks = options.ranks or count
        if ranks > count:
            if options.backend != "gloo":
                raise ValueError(sentence("error.ranks.gpus", option=option, ranks=ranks, count=count))
            check_cpu_ranks(ranks, options.oversubscribe, option)
        return device, ranks
    if options.ranks is not None:  # the default, 2, is allowed even on one CPU
        check_cpu_ranks(options.ranks, options.oversubscribe, option)
    return device, options.ranks or 2


FACT_FILES = ("nvml.json", "nvidia-smi-topo.txt", "nvidia-smi-topo-p2p.txt", "nvidia-smi-nvlink-s.txt",
              "meminfo.txt", "cpuinfo.txt", "cgroup.txt", "uptime.txt")
"""What the expected figures and the report's facts need: the GPUs, their links, the host's memory and CPUs. Not
`nvidia-smi -q`, lspci, pip freeze or the kernel log (seconds of subprocesses, beside ranks starting CUDA)."""


def local_facts(device: str, files: tuple[str, ...] | None = FACT_FILES):
    """Facts of this node (fast: no torch probe) to derive expected figures; None on CPU runs. `files`: the bundle
    files read (None: every one, `nvidia-smi -q` and the kernel log included, as burn's report summarises them)."""
    if device != "cuda":
        return None
    found, _ = collect(with_torch=False, only=files)
    return build_facts(found, live=True)


def visible_devices(selection: list[str], facts: Any) -> str | None:
    """--gpus NVML indices, bus ids or UUIDs → CUDA_VISIBLE_DEVICES (UUIDs, order-proof)."""
    if not selection:
        return None
    chosen = []
    for item in selection:
        match = None
        for gpu in (facts.gpus or []) if facts else []:
            if item == str(gpu.index) or normalize_bus_id(item) == gpu.bus_id or item == gpu.uuid:
                match = gpu
        if match is None or not match.uuid:
            raise ValueError(sentence("error.gpus.no_such", item=item))
        chosen.append(match.uuid)
    return ",".join(chosen)


def selected_indices(visible: str | None, facts: Any, ranks: int) -> list[int] | None:
    """NVML indices of the GPUs the ranks use: the first `ranks` of those `visible` (gpuready's --gpus, else the
    user's CUDA_VISIBLE_DEVICES) names; None: every GPU (none known)."""
    gpus = (facts.gpus or []) if facts else []
    chosen = visible_nvml_indices(gpus, visible)
    if chosen is None:
        chosen = [gpu.index for gpu in sorted(gpus, key=lambda gpu: gpu.bus_id or "")]
    return chosen[:ranks] if chosen else None


def gpus_by_identity(identity: list[GpuIdentity], visible: str | None, ranks: int | None) -> list[int]:
    """NVML indices (of NVML's `identity`: bus id, UUID) of the GPUs `visible` names (gpuready's --gpus as UUIDs, in
    their order), else those the user's CUDA_VISIBLE_DEVICES shows, else every GPU; the first `ranks` of them.
    ValueError (a usage error): the variable shows no GPU NVML knows, or fewer GPUs than `ranks`."""
    if visible is not None:
        chosen = [index for uuid in visible.split(",") for index, gpu in enumerate(identity) if gpu.uuid == uuid]
    else:
        chosen = visible_nvml_indices(identity)
        if chosen is None:
            chosen = list(range(len(identity)))
        elif not chosen:
            raise ValueError(sentence("error.visible.none", value=repr(os.environ.get("CUDA_VISIBLE_DEVICES"))))
    if ranks is not None:
        if ranks > len(chosen):
            raise ValueError(sentence("error.ranks.selected", ranks=ranks, count=len(chosen)))
        chosen = chosen[:ranks]
    return chosen


def ranks_per_node(args: argparse.Namespace) -> int:
    """--nproc-per-node, or the GPUs (CPU ranks) here: the ranks torchrun starts on this node."""
    try:
        return resolve_device(DeviceRequest(device=args.device, backend=getattr(args, "backend", "auto"),
                                            ranks=args.nproc_per_node, oversubscribe=args.oversubscribe),
                              option="--nproc-per-node")[1]
    except (ValueError, RuntimeError) as error:
        raise UsageError(said_of(error)) from None


OVERSUBSCRIBE_FACTOR = 4
"""With --oversubscribe, at most this many ranks per usable CPU (each rank is a whole Python + torch process)."""


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask: taskset, cgroup cpusets), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_cpu_ranks(ranks: int, oversubscribe: bool = False, option: str = "--ranks") -> None:
    """Ranks that do not each own a GPU are bounded by the CPUs: one per CPU, or OVERSUBSCRIBE_FACTOR per CPU
    with --oversubscribe. Raises ValueError (a usage error) before anything is started."""
    cpus = usable_cpus()
    if not oversubscribe and ranks > cpus:
        raise ValueError(sentence("error.ranks.cpus", option=option, ranks=ranks, cpus=cpus,
                                  most=OVERSUBSCRIBE_FACTOR * cpus))
    if ranks > OVERSUBSCRIBE_FACTOR * cpus:
        raise ValueError(sentence("error.ranks.oversubscribed", option=option, ranks=ranks, cpus=cpus,
                                  most=OVERSUBSCRIBE_FACTOR * cpus, factor=OVERSUBSCRIBE_FACTOR))

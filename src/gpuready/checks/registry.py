"""The check registry: stable ids, the facts each check needs, and the runner.

A check is a pure function from a CheckContext (facts + options) to findings. The runner
turns missing facts into `skip` and an unexpected exception into `error`, so one broken
check never stops the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from gpuready.facts.types import Facts, GpuFacts, KernelEvent
from gpuready.i18n import Said, finding_text, said
from gpuready.model import Evidence, Finding, GpuRef, Status, Subject

MAX_EVIDENCE_LINES = 5
"""Quoted input lines per finding: enough to see the pattern, few enough to read."""

# Fact (attribute path on Facts) → the bundle files that provide it, for skip messages.
FACT_SOURCES = {
    "gpus": "nvml.json / nvidia-smi-q.xml / nvidia-smi-q.txt / nvidia-smi.txt",
    "topology": "nvidia-smi-topo.txt",
    "p2p_read": "nvidia-smi-topo-p2p.txt / nvml.json",
    "kernel_log": "dmesg.txt",
    "pci_devices": "lspci-vv.txt",
    "torch": "torch.json",
    "env": "env.txt",
    "ib_ports": "sysfs.txt / ibv_devinfo.txt",
    "net_interfaces": "sysfs.txt",
    "host.memory_total_bytes": "meminfo.txt",
    "host.cpu_count": "cpuinfo.txt",
    "host.shm_total_bytes": "df.txt",
    "host.disks": "df.txt",
    "host.memlock_limit_bytes": "ulimit.txt",
    "host.uptime_s": "uptime.txt",
    "host.kernel_modules": "modules.txt",
    "driver_version": "nvml.json / nvidia-smi",
    "rendezvous_port_free": "gpuready check",
}


@dataclass(kw_only=True)
class CheckOptions:
    expect_gpus: int | None = None
    psu_watts: float | None = None
    circuit_watts: float | None = None
    expect_busbw_gb_per_s: float | None = None
    """`diagnose --expect`: the bus bandwidth nccl-tests runs are judged against, not what the topology allows."""
    nccl_busbw: Callable[..., Any] | None = None
    """What a ring over given GPUs should reach: estimate/expect.py `nccl_busbw(facts, gpus, gpu_name)`, handed in by
    the pipeline (estimate/ stands above checks/); None: nccl-tests runs are not judged against the topology."""


Judge = Callable[["CheckContext"], Iterable[Finding]]


@dataclass(frozen=True)
class Check:
    id: str
    needs: tuple[str, ...]
    function: Judge | None
    """Its judgement of the machine's facts; None for a check of logs alone."""
    needs_gpus: bool = True
    """Skip (with the reason) when no GPU is visible; gpu.present reports the absence itself."""
    logs: Judge | None = None
    """Its judgement of the log readers' facts (`Facts.logs`), where it has one (run_log_checks)."""


CHECKS: dict[str, Check] = {}


def _register(entry: Check) -> None:
    if entry.id in CHECKS:
        raise ValueError(f"check id {entry.id} registered twice")
    CHECKS[entry.id] = entry


def check(check_id: str, needs: tuple[str, ...] = (), needs_gpus: bool = True, logs: Judge | None = None):
    """`logs`: the same check's judgement of what the log readers saw (diagnose), beside the machine's facts'."""
    def register(function: Judge):
        _register(Check(check_id, needs, function, needs_gpus, logs))
        return function
    return register


def log_check(check_id: str):
    """A check of the log readers' facts alone (`Facts.logs`): run by run_log_checks where a log reader ran; `check`
    has no logs, so it is not applicable there and gives no finding at all."""
    def register(function: Judge):
        _register(Check(check_id, (), None, needs_gpus=False, logs=function))
        return function
    return register


@dataclass
class CheckContext:
    facts: Facts
    options: CheckOptions = field(default_factory=CheckOptions)
    check_id: str = ""

    @property
    def host(self) -> str:
        return self.facts.host.hostname or "localhost"

    @property
    def gpus(self) -> list[GpuFacts]:
        return [gpu for gpu in self.facts.gpus or []]

    def gpu_ref(self, gpu: GpuFacts) -> GpuRef:
        return GpuRef(index=gpu.index, bus_id=gpu.bus_id, uuid=gpu.uuid)

    def subject(self, gpu: GpuFacts | None = None, peer: GpuFacts | None = None, nic: str | None = None) -> Subject:
        return Subject(host=self.host, gpu=self.gpu_ref(gpu) if gpu else None,
                       peer=self.gpu_ref(peer) if peer else None, nic=nic)

    def finding(self, status: Status, message: str | Said, *, gpu: GpuFacts | None = None,
                peer: GpuFacts | None = None, nic: str | None = None, observed: Any = None, expected: Any = None,
                fix: str | None = None, refs: list[str] | None = None, check_id: str | None = None,
                evidence: list[Evidence] | None = None) -> Finding:
        """`message`: a catalogue text (`said(id, **values)`, which brings its fix too) or, until a check's messages
        are in the catalogue, an English sentence."""
        text = finding_text(message) if isinstance(message, Said) else {"message": message}
        if fix is not None or "fix" not in text:
            text["fix"] = fix
        return Finding(check_id=check_id or self.check_id, status=status, subject=self.subject(gpu, peer, nic),
                       observed=observed, expected=expected, refs=refs or [], evidence=evidence or [], **text)

    def passed(self, message: str | Said, **kwargs: Any) -> Finding:
        return self.finding(Status.PASS, message, **kwargs)

    def warn(self, message: str | Said, **kwargs: Any) -> Finding:
        return self.finding(Status.WARN, message, **kwargs)

    def fail(self, message: str | Said, **kwargs: Any) -> Finding:
        return self.finding(Status.FAIL, message, **kwargs)

    def skip(self, message: str | Said, **kwargs: Any) -> Finding:
        return self.finding(Status.SKIP, message, **kwargs)


def _fact(facts: Facts, path: str) -> Any:
    value: Any = facts
    for part in path.split("."):
        value = getattr(value, part, None)
    return value


CHECK_MODULES = ("gpu", "nvlink", "health", "host", "network", "ib_rails", "hca_placement", "nic_kernel", "pcie",
                 "power", "software", "topology", "fabric_mnnvl", "nccl_logs", "torch_logs", "nccl_tests", "host_logs",
                 "dcgm_diag", "k8s_node", "job_logs")
"""The modules of checks, in the order a report lists their findings (the order a plain `check` always had)."""


def registered_in_order() -> list[str]:
    """Every check id, module by module in CHECK_MODULES' order, each module's in the order it defines them: the same
    order in every process (CHECKS alone is in import order: `plan` importing checks.power first put power.* first)."""
    import importlib
    for name in CHECK_MODULES:  # importing a module registers its checks
        importlib.import_module(f"gpuready.checks.{name}")
    position = {name: index for index, name in enumerate(CHECK_MODULES)}
    defined = list(CHECKS)
    return sorted(defined, key=lambda check_id: (position[_module_of(CHECKS[check_id])], defined.index(check_id)))


def _module_of(entry: Check) -> str:
    return (entry.function or entry.logs).__module__.rsplit(".", 1)[1]


def run_checks(facts: Facts, options: CheckOptions | None = None, only: Iterable[str] | None = None) -> list[Finding]:
    options = options or CheckOptions()
    findings: list[Finding] = []
    selected = [CHECKS[check_id] for check_id in (only or registered_in_order())]
    for entry in selected:
        if entry.function is None:
            continue  # a check of logs alone: not applicable to a machine's facts
        context = CheckContext(facts=facts, options=options, check_id=entry.id)
        missing = [need for need in entry.needs if _fact(facts, need) is None]
        if entry.needs_gpus and not facts.gpus:
            findings.append(context.skip(said("registry.no_gpu")))
            continue
        if missing:
            sources = ", ".join(f"{need} ({FACT_SOURCES.get(need, need)})" for need in missing)
            findings.append(context.skip(said("registry.not_judged", sources=sources)))
            continue
        findings.extend(_judged(context, entry.function) or [context.passed(said("registry.nothing_to_flag"))])
    return findings


def run_log_checks(facts: Facts, options: CheckOptions | None = None) -> list[Finding]:
    """The findings of every check that judges the log readers' facts (`facts.logs`), in the registry's order; none
    where no log reader ran. A check whose logs show nothing says nothing: logs tell what went wrong, not what is
    fine, and silence in them is no evidence for a pass."""
    if facts.logs is None:
        return []
    options = options or CheckOptions()
    findings: list[Finding] = []
    for check_id in registered_in_order():
        entry = CHECKS[check_id]
        if entry.logs is not None:
            findings.extend(_judged(CheckContext(facts=facts, options=options, check_id=entry.id), entry.logs))
    return findings


def _judged(context: CheckContext, judge: Judge) -> list[Finding]:
    """What one judge says; an unexpected error in it is an `error` finding, and the other checks still run."""
    try:
        return list(judge(context))
    except Exception as error:  # a bug in a check is reported, the other checks still run
        return [context.finding(Status.ERROR, said("registry.check_crashed", error=type(error).__name__,
                                                   detail=str(error)))]


def per_gpu(context: CheckContext, judge: Callable[[GpuFacts], Finding | None], all_good: Said, *,
            reported: Callable[[GpuFacts], bool], unreported: Said) -> list[Finding]:
    """One finding per GPU that is flagged, and a single pass for the rest.

    Only GPUs that report the facts the judge needs (`reported`) are judged or counted in the pass: a run where
    none does is one `skip` saying `unreported`, never a pass on nothing. `all_good` gets the number of GPUs judged
    as `count`.
    """
    gpus = [gpu for gpu in context.gpus if reported(gpu)]
    if not gpus:
        return [context.skip(unreported)]
    flagged = [finding for gpu in gpus if (finding := judge(gpu)) is not None]
    problems = [finding for finding in flagged if finding.status != Status.PASS]
    if problems:
        return flagged
    unjudged = len(context.gpus) - len(gpus)
    judged = said(all_good.msg_id, **all_good.values, count=len(gpus))
    return flagged or [context.passed(said("registry.all_good_others_unreported", judged=judged, unjudged=unjudged)
                                      if unjudged else judged)]


# The sources that query the driver per GPU in depth (modes, fabric, retirement): not lists or matrices.
_DEEP_SOURCES = ("nvml.json", "nvidia-smi-q.xml", "nvidia-smi-q.txt")


def queried(gpu: GpuFacts) -> bool:
    """The driver was asked about this GPU in depth (nvml.json or `nvidia-smi -q`)."""
    return any(source in _DEEP_SOURCES for source in gpu.source_files())


def kernel_log_missing(context: CheckContext, what: Said) -> Finding | None:
    """A skip saying why the kernel log is not there (unreadable without root, or not in the bundle), else None."""
    facts = context.facts
    if facts.kernel_log is not None:
        return None
    reason = "unreadable" if facts.kernel_log_readable is False else "absent"
    return context.skip(said(f"registry.kernel_log_{reason}", what=what))


def kernel_evidence(events: list[KernelEvent], limit: int = MAX_EVIDENCE_LINES) -> list[Evidence]:
    """The lines a kernel-log finding rests on, with file and line: the first few and the last one."""
    located = [event for event in events if event.line_number is not None]
    chosen = located[:limit - 1] + located[-1:] if len(located) > limit else located
    return [Evidence(file=event.source or "kernel log", line=event.line_number, text=event.line[:400])
            for event in chosen]

"""The evidence pipeline every verb stands on: evidence (a live collection or files) → facts → checks → a report.

`check` is this pipeline and an output; `diagnose` feeds it the same evidence plus its log readers' facts; validate,
burn and bench take the facts summary and the GPU list from here.
"""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path

from gpuready import __version__
from gpuready.evidence.collect import collect
from gpuready.evidence.layout import BUNDLE_FILES
from gpuready.evidence.bundle import Bundle
from gpuready.evidence.limits import DEFAULT_LIMITS, InputLimits
from gpuready.evidence.reader import read_bundle
from gpuready.facts.dcgm_reader import DcgmDiagReader
from gpuready.facts.host_log_reader import HostLogReader
from gpuready.facts.k8s_reader import K8sNodeReader
from gpuready.facts.log_lines import Reader
from gpuready.facts.nccl_log_reader import NcclLogReader
from gpuready.facts.nccl_tests_reader import NcclTestsReader
from gpuready.facts.nic_reader import NicLinesReader
from gpuready.facts.torch_log_reader import TorchErrorReader
from gpuready.checks.registry import CheckOptions, run_checks, run_log_checks
from gpuready.checks.remediation import assign_levels
from gpuready.estimate.expect import nccl_busbw
from gpuready.facts.log_facts import LogFacts
from gpuready.facts.bad_input import said_of
from gpuready.evidence.build import UNRECOGNISED, build_facts, read_in_part, skipped_reason
from gpuready.evidence.machines import split_bundle
from gpuready.facts.types import Facts
from gpuready.knowledge import gpu_spec, thresholds
from gpuready.node import scheduler_names
from gpuready.i18n import Said, finding_text, said
from gpuready.model import (INPUT_CHECK_ID, SKIPPED_CHECK_ID, TRUNCATED_CHECK_ID, UNKNOWN_HOST, Finding, Report, Status,
                            Subject)


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


def log_readers() -> list[Reader]:
    """The readers of logs (NCCL, PyTorch and launchers, nccl-tests, host and container logs, DCGM, Kubernetes), fresh:
    `diagnose` feeds them every input, `check --bundle` the bundle's files that are no tool output."""
    return [NcclLogReader(), TorchErrorReader(), NcclTestsReader(), HostLogReader(), DcgmDiagReader(), K8sNodeReader(),
            NicLinesReader()]


def read_evidence_bundle(path: Path, limits: InputLimits = DEFAULT_LIMITS) -> Bundle:
    """A bundle as `check --bundle` reads it: its tool outputs, and its other text files through the log readers."""
    return read_bundle(path, limits, log_readers())


def gather_facts(bundle: Path | None, fast: bool) -> Facts:
    """Raises BundleError when the bundle as a whole cannot be read."""
    if bundle is not None:
        return build_facts(read_bundle(bundle))
    files, _manifest = collect(with_torch=not fast)
    facts = build_facts(files, live=True)
    facts.rendezvous_port_free = port_is_free(thresholds("rendezvous")["port"])
    return facts


# The sources where the driver (NVML, nvidia-smi) or CUDA answered for each GPU: a GPU it lists is one it can reach.
# lspci and the kernel log are the host's view: they name GPUs the driver may not reach.
DRIVER_STATE_SOURCES = ("nvml.json", "nvidia-smi-q.xml", "nvidia-smi-q.txt", "nvidia-smi.txt", "nvidia-smi-topo.txt",
                        "nvidia-smi-nvlink-s.txt", "nvidia-smi-L.txt", "cuda-p2p.txt")


def not_enough_evidence(facts: Facts) -> Said | None:
    """Why the inputs do not show the GPUs' state, or None where the driver reports them (or says there are none).

    A `ready` needs evidence that names GPUs and shows the driver reaching them: lspci or a kernel log name GPUs the
    driver may not reach, and a `-q` head without GPU sections names none."""
    if facts.gpu_probe_error is not None:
        return None
    if facts.gpus == [] and any(facts.sources.get(name, "").startswith("parsed") for name in ("nvml.json",)):
        return None  # NVML answered and counted no GPU: gpu.present judges that
    if any(source in DRIVER_STATE_SOURCES for gpu in facts.gpus or [] for source in gpu.source_files()):
        return None
    read = [_file_state(name, state) for name, state in facts.sources.items() if state != "missing"]
    named = sorted({source for gpu in facts.gpus or [] for source in gpu.source_files()})
    wanted = ", ".join(f"{name} (`{command}`)" if (command := BUNDLE_FILES[name].split(' (')[0]).startswith("nvidia-smi")
                       else name for name in DRIVER_STATE_SOURCES)  # a command as the reader types it; not prose
    what = (said("evidence.named_without_state", files=", ".join(named), count=len(facts.gpus or [])) if named else
            said("evidence.no_gpu_announced", announced=facts.gpus_announced) if facts.gpus_announced else
            said("evidence.no_gpu_named"))
    return said("evidence.not_enough", what=what, read=read or [said("evidence.read_nothing")], wanted=wanted)


def _file_state(name: str, state: str) -> Said:
    """`notes.txt (ignored: …)`; a file that was parsed by its name alone."""
    if state.startswith("parsed"):
        return said("evidence.file_parsed", name=said_of(name))
    if state == UNRECOGNISED:
        return said("evidence.file_unrecognised", name=said_of(name))
    return said("evidence.file_state", name=said_of(name), state=said_of(state))


MIXED_MACHINES_ID = "bundle.mixed_machines"


def check_files(files: dict[str, str], options: CheckOptions, fail_on_warn: bool = False,
                multi_node: bool = False) -> tuple[Report, list[Facts]]:
    """The report on tool outputs given as files (a bundle, a folder, pasted outputs), and the facts of each machine.

    Files that name different hosts or drivers are judged machine by machine, never merged into one machine: each
    machine's findings carry its name, a `bundle.mixed_machines` warning names each file's machine, and the verdict is
    `unknown` where any one of them lacks the evidence for one."""
    parts = split_bundle(files)
    logs = files.logs if isinstance(files, Bundle) else None  # logs name no machine: judged with the first
    if len(parts) == 1:
        facts = build_facts(files)
        facts.host.hostname = facts.host.hostname or parts[0][0].host or UNKNOWN_HOST
        facts.logs = logs
        return check_report(facts, options, fail_on_warn, multi_node), [facts]
    reports, all_facts = [], []
    for number, (machine, part) in enumerate(parts, 1):
        facts = build_facts(part)
        facts.host.hostname = facts.host.hostname or machine.host or f"machine {number} ({machine.describe()})"
        facts.logs = logs if number == 1 else None
        reports.append(check_report(facts, options, fail_on_warn, multi_node))
        all_facts.append(facts)
    named = "; ".join(f"{report.host}: {', '.join(sorted(part))}" for report, (_id, part) in zip(reports, parts))
    mixed = Finding(check_id=MIXED_MACHINES_ID, status=Status.WARN, subject=Subject(host=reports[0].host),
                    **finding_text(said("bundle.mixed_machines", count=len(parts), named=named)),
                    observed=[{"machine": report.host, "files": sorted(part)} for report, (_id, part)
                              in zip(reports, parts)])
    report = Report(tool_version=__version__, host=f"{len(parts)} machines",
                    findings=[mixed] + [finding for part_report in reports for finding in part_report.findings],
                    facts={**reports[0].facts,
                           "machines": [{"machine": report.host, **report.facts} for report in reports]},
                    input_error=any(part_report.input_error for part_report in reports), fail_on_warn=fail_on_warn,
                    multi_node=multi_node,
                    not_enough_evidence=_of_each_machine(reports))
    assign_levels(report.findings)
    return report, all_facts


def _of_each_machine(reports: list[Report]) -> Said | None:
    """Why each machine whose files do not show its GPUs cannot be judged, named by machine."""
    lacking = [said("evidence.of_machine", machine=report.host, why=report.not_enough_evidence)
               for report in reports if report.not_enough_evidence]
    return said("evidence.of_machines", machines=lacking) if lacking else None


def check_report(facts: Facts, options: CheckOptions, fail_on_warn: bool = False, multi_node: bool = False) -> Report:
    host = facts.host.hostname or socket.gethostname()
    facts.host.hostname = host
    findings = run_checks(facts, options)
    if facts.logs is not None:  # a bundle's logs: judged as diagnose judges them, beside the machine's facts
        findings += log_findings(facts.logs, host=host, facts=facts, options=options)
    for name, sentence in facts.input_errors:
        findings.append(Finding(check_id=INPUT_CHECK_ID, status=Status.ERROR, subject=Subject(host=host),
                                **finding_text(said("bundle.unreadable.file", sentence=said_of(sentence),
                                                    name=said_of(name))),
                                observed=name))
    for check_id, name, text in bundle_notes(facts):
        findings.append(Finding(check_id=check_id, status=Status.WARN, subject=Subject(host=host),
                                **finding_text(text), observed=name))
    assign_levels(findings)
    return Report(tool_version=__version__, host=host, findings=findings, facts=summarize_facts(facts),
                  input_error=bool(facts.input_errors), fail_on_warn=fail_on_warn, multi_node=multi_node,
                  not_enough_evidence=not_enough_evidence(facts),
                  scheduler=scheduler_names() if facts.live else {})  # files name no scheduler of this machine


def with_remediation(report: Report) -> Report:
    """The report with each finding's remediation level (checks/remediation.py), set once before it is written."""
    assign_levels(report.findings)
    return report


def log_findings(logs: LogFacts, *, host: str, facts: Facts | None = None,
                 options: CheckOptions | None = None) -> list[Finding]:
    """What the log readers saw, judged by the registry's checks of logs (`diagnose`): on a copy of the machine's
    facts where the inputs had tool outputs (an nccl-tests run is judged against its GPUs and links), named `host`."""
    machine = facts or Facts()
    judged = dataclasses.replace(machine, host=dataclasses.replace(machine.host, hostname=host), logs=logs)
    options = options or CheckOptions()
    if options.nccl_busbw is None:
        options = dataclasses.replace(options, nccl_busbw=nccl_busbw)
    return run_log_checks(judged, options)


def bundle_notes(facts: Facts) -> list[tuple[str, str, Said]]:
    """(check id, entry, its text) for each bundle entry skipped or read in part (warnings, not input errors)."""
    notes = []
    for name, state in facts.sources.items():
        if (reason := skipped_reason(state)) is not None:
            notes.append((SKIPPED_CHECK_ID, name, said("bundle.skipped.entry", name=said_of(name), reason=reason)))
        if (what := read_in_part(state)) is not None:
            notes.append((TRUNCATED_CHECK_ID, name, said("bundle.truncated.entry", name=said_of(name), reason=what)))
    return notes


def summarize_facts(facts: Facts) -> dict:
    gpus = []
    for gpu in facts.gpus or []:
        spec = gpu_spec(gpu.name)
        gpus.append({"index": gpu.index, "bus_id": gpu.bus_id, "uuid": gpu.uuid, "name": gpu.name,
                     "model": spec.model if spec else None, "memory_total_bytes": gpu.memory_total_bytes,
                     "compute_capability": gpu.compute_capability, "power_limit_w": gpu.power_limit_w,
                     "pcie": f"Gen{gpu.pcie_gen_current or '?'}/{gpu.pcie_gen_max or '?'} "
                             f"x{gpu.pcie_width_current or '?'}/{gpu.pcie_width_max or '?'}",
                     "temperature_c": gpu.temperature_c, "source": gpu.source,
                     **{key: getattr(gpu, key) for key in ("fabric_clique_id", "fabric_cluster_uuid")
                        if getattr(gpu, key) is not None}})  # the NVLink domain a tray registered in (fleet)
    torch = facts.torch
    return {
        "live": facts.live,
        "driver_version": facts.driver_version,
        "cuda_driver_version": facts.cuda_driver_version,
        "gpus": gpus,
        "torch": {"version": torch.version, "cuda": torch.cuda, "nccl": torch.nccl_version,
                  "device_count": torch.device_count} if torch else None,
        "host": {"cpu_count": facts.host.cpu_count, "cpu_model": facts.host.cpu_model,
                 "memory_total_bytes": facts.host.memory_total_bytes, "container": facts.host.container},
        "topology": _topology(facts.topology),
        "sources": facts.sources,
    }


def _topology(topology) -> dict | None:
    """`nvidia-smi topo -m`'s GPU matrix as rows of link names (`NV18`, `PIX`, `SYS`, `X`), for the HTML heatmap."""
    if topology is None or not topology.gpu_labels:
        return None
    count = len(topology.gpu_labels)
    return {"gpu_labels": list(topology.gpu_labels),
            "links": [[topology.links.get((i, j)) for j in range(count)] for i in range(count)]}

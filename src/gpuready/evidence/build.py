"""Bundle files → Facts. Live and offline both come through here.

Each file has one parser; a file that fails to parse becomes an input error naming it, and
the other files are still used. A file whose name is not a bundle name is read by what its content
shows (bundle/sniff.py). GPU facts from several files are merged by PCI bus id, the richest source
first (nvml.json, then `nvidia-smi -q -x`, then `-q` text, then plain `nvidia-smi`); GPUs that a tool
names by index only (`topo -m`, `nvlink -s`, `-L`) join by UUID or index. lspci and the kernel log name
the GPUs only where no driver-side source does.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Callable

from gpuready.evidence.layout import BUNDLE_FILES
from gpuready.evidence.bundle import Bundle, entry_error, state
from gpuready.evidence.sniff import kind_of, why_not_text
from gpuready.facts import host_files, network_files, software_files
from gpuready.facts.bad_input import ParseFailure, Sentence, sentence
from gpuready.facts.cuda_samples import parse_cuda_p2p
from gpuready.facts.gpu_lists import parse_gpu_list
from gpuready.facts.imex import parse_imex_channels, parse_imex_ctl, parse_imex_service
from gpuready.facts.kernel_log import mark_history, parse_kernel_log
from gpuready.facts.lspci import parse_lspci
from gpuready.facts.nvidia_smi_plain import parse_nvidia_smi_plain
from gpuready.facts.nvidia_smi_q import parse_nvidia_smi_q_text, parse_nvidia_smi_q_xml
from gpuready.facts.nvml_json import ForeignNvmlJson, NvmlDocument
from gpuready.facts.topology import parse_nvlink_status, parse_topo_matrix, parse_topo_p2p
from gpuready.facts.types import Facts, GpuFacts
from gpuready.i18n import Said, said
from gpuready.knowledge import thresholds


# Tool outputs that may come as several files (fragments of one tool, logs of several boots): each is read.
_REPEATABLE = frozenset({"nvidia-smi-q.xml", "nvidia-smi-q.txt", "nvidia-smi.txt", "nvidia-smi-L.txt", "dmesg.txt"})

# `facts.sources` states that say a file was not read (a link, a folder, a special file) or was read in part (after its
# state); verbs/check.py turns them into findings (`skipped_reason`, `read_in_part`). Each state is a `Sentence`: its
# English, as the JSON report keeps it, and its catalogue text.
SKIPPED = "skipped: "
READ_IN_PART = "read in part: "


UNRECOGNISED = "ignored: not a tool output gpuready recognises"
"""The English of the state of a file that is no tool output gpuready knows (`facts.sources`)."""


def skipped_reason(state: str) -> Said | str | None:
    """Why an entry was skipped (a link, a folder, a special file), or None where it was not."""
    if isinstance(state, Sentence) and state.said.msg_id == "reader.state.skipped":
        return state.said.values["reason"]
    return state[len(SKIPPED):] if state.startswith(SKIPPED) else None  # a state written as text (tests)


def read_in_part(state: str) -> Said | str | None:
    """What was read of an entry read in part, or None where it was read whole (or not at all)."""
    if isinstance(state, Sentence) and state.said.msg_id in ("facts.state.read_in_part", "facts.state.after"):
        return state.said.values["what"]
    return state.split(READ_IN_PART, 1)[1] if READ_IN_PART in state else None

def classify_files(files: dict[str, str]) -> tuple[dict[str, list[tuple[str, str]]], dict[str, str]]:
    """kind → [(file name, text)], bundle names by name and any other file by its content; plus the unrecognised.

    A `Bundle` says each file's kind already (the reader looked at its head)."""
    by_kind: dict[str, list[tuple[str, str]]] = {}
    unrecognised: dict[str, str] = {}
    kinds = files.kinds if isinstance(files, Bundle) else {}
    for name in sorted(files, key=lambda name: (name not in BUNDLE_FILES, name)):
        kind = kinds.get(name) or (name if name in BUNDLE_FILES else kind_of(files[name]))
        if kind is None:
            unrecognised[name] = state("ignored", said("reader.ignored.unrecognised"))
        else:
            by_kind.setdefault(kind, []).append((name, files[name]))
    return by_kind, unrecognised


class _FactsBuilder:
    """The state of one build: the files by kind, the GPU lists each source gave, and the file being read now."""

    def __init__(self, files: dict[str, str], live: bool):
        self.files = files
        self.facts = Facts(live=live)
        self.by_kind, unrecognised = classify_files(files)
        self.facts.sources.update(unrecognised)
        if isinstance(files, Bundle):
            self.facts.sources.update(files.not_read)
            self.facts.input_errors.extend(files.errors)
        self.gpu_sources: list[tuple[str, list[GpuFacts]]] = []
        self.indexed_sources: list[tuple[str, list[GpuFacts]]] = []
        self.nvlinks_cut: set[int] = set()
        """GPUs whose `nvlink -s` listing a poster cut: their links are not reported."""
        self.reading = ""
        """The file `use` is applying now (a kernel log's events name their file)."""

    def use(self, kind: str, apply: Callable[[str], None]) -> None:
        entries = self.by_kind.get(kind)
        if not entries:
            self.facts.sources.setdefault(kind, "missing")  # or what the reader said (unreadable, skipped)
            return
        if kind not in _REPEATABLE:
            for name, _text in entries[1:]:
                self.facts.sources[name] = state("ignored", said("facts.ignored.already_gave",
                                                                 first=entries[0][0], kind=kind))
            entries = entries[:1]
        for name, text in entries:
            self.reading = name
            if not_text := why_not_text(text):  # binary content is refused before any parser sees it
                self.facts.sources[name] = state("unreadable", not_text)
                self.facts.input_errors.append((name, entry_error(name, not_text)))
                continue
            try:
                apply(text)
                self.facts.sources[name] = sentence("facts.state.parsed") if name == kind else \
                    sentence("facts.state.parsed_as", kind=kind)
            except ForeignNvmlJson as error:
                self.facts.sources[name] = state("ignored", error)
            except Exception as error:  # any parser failure is about the file, reported, not raised
                failure = _parse_failure(error)
                self.facts.sources[name] = state("unreadable", failure)
                self.facts.input_errors.append((name, sentence("facts.error.not_parsed", name=name, kind=kind,
                                                               failure=failure)))

    def from_nvml(self, text: str) -> None:
        document = NvmlDocument(text)
        if document.init_error:
            self.facts.gpu_probe_error = document.init_error
            return
        self.facts.driver_version = self.facts.driver_version or document.driver_version
        self.facts.cuda_driver_version = self.facts.cuda_driver_version or document.cuda_driver_version
        self.facts.gpus_announced = document.device_count
        self.gpu_sources.append(("nvml.json", document.gpus))
        if document.duplicates:  # the worst reading of each is judged (merge_gpu_sources)
            self.facts.input_errors.append(("nvml.json", sentence("facts.error.duplicate_gpu", name="nvml.json",
                                                                  gpus=", ".join(document.duplicates))))
        if document.p2p_read:
            self.facts.p2p_read = self.facts.p2p_read or document.p2p_read

    def from_smi_query(self, parse: Callable[[str], Any], name: str) -> Callable[[str], None]:
        def apply(text: str) -> None:
            query = parse(text)
            self.facts.driver_version = self.facts.driver_version or query.driver_version
            self.facts.cuda_driver_version = self.facts.cuda_driver_version or query.cuda_version
            for gpu in query.gpus:
                gpu.source = name
            if query.attached_gpus is not None:
                self.facts.gpus_announced = max(self.facts.gpus_announced or 0, query.attached_gpus)
            if query.gpus or not query.attached_gpus and not query.headless:  # a head that announces GPUs but
                self.gpu_sources.append((name, query.gpus))  # holds none is a fragment, not "the driver sees no GPU"
            for gpu in query.headless:
                gpu.source = name
            self.facts.unnamed_gpus += query.headless
        return apply

    def from_plain(self, text: str) -> None:
        plain = parse_nvidia_smi_plain(text)
        if plain.error_kind:
            self.facts.gpu_probe_error = self.facts.gpu_probe_error or plain.error_line
        self.facts.driver_version = self.facts.driver_version or plain.driver_version
        self.facts.cuda_driver_version = self.facts.cuda_driver_version or plain.cuda_version
        for gpu in plain.gpus:
            if gpu.bus_id in plain.corrupted_inforom_bus_ids:
                gpu.inforom_valid = False
        if plain.processes is not None:
            self.facts.process_table = (self.facts.process_table or []) + plain.processes
        if not plain.gpus and not plain.error_kind and not plain.driver_version and plain.processes is None:
            raise ParseFailure("parse.nvidia_smi.none")
        if plain.gpus or plain.error_kind or plain.driver_version:  # a Processes block alone names no GPU
            self.gpu_sources.append(("nvidia-smi.txt", plain.gpus))

    def from_topology(self, text: str) -> None:
        self.facts.topology = parse_topo_matrix(text)
        self.indexed_sources.append(("nvidia-smi-topo.txt", [
            GpuFacts(index=int(label[3:]), bus_id=None, source="nvidia-smi-topo.txt")
            for label in self.facts.topology.gpu_labels]))

    def from_nvlink_status(self, text: str) -> None:
        links = parse_nvlink_status(text)
        try:
            gpus = parse_gpu_list(text, "nvidia-smi-nvlink-s.txt")
        except ValueError:  # an empty capture: no NVLink reported
            gpus = []
        self.nvlinks_cut |= {index for index, found in links.items() if found is None}
        for gpu in gpus:
            gpu.nvlinks = links.get(gpu.index, [])
        self.indexed_sources.append(("nvidia-smi-nvlink-s.txt", gpus))

    def from_cuda_samples(self, text: str) -> None:
        samples = parse_cuda_p2p(text)
        named = [gpu for gpu in samples.gpus if gpu.bus_id]
        if named:
            self.gpu_sources.append(("cuda-p2p.txt", named))
        elif samples.gpus:
            self.indexed_sources.append(("cuda-p2p.txt", samples.gpus))
        if samples.p2p:
            # CUDA numbers the devices its own way: with bus ids, the pairs follow PCI bus order as NVML's do
            order = {gpu.index: position for position, gpu in enumerate(sorted(named, key=lambda gpu: gpu.bus_id))}
            self.facts.p2p_read = self.facts.p2p_read or {(order.get(i, i), order.get(j, j)): state
                                                for (i, j), state in samples.p2p.items()}

    def kernel_log(self, text: str) -> None:
        line_numbers = self.files.line_numbers.get(self.reading) if isinstance(self.files, Bundle) else None
        _apply_kernel_log(self.facts, text, self.reading, line_numbers)

    def read_gpu_files(self) -> None:
        """The driver's and CUDA's view of the GPUs, their links and the kernel's, then the GPUs merged by bus id."""
        facts, use = self.facts, self.use
        use("nvml.json", self.from_nvml)
        use("nvidia-smi-q.xml", self.from_smi_query(parse_nvidia_smi_q_xml, "nvidia-smi-q.xml"))
        use("nvidia-smi-q.txt", self.from_smi_query(parse_nvidia_smi_q_text, "nvidia-smi-q.txt"))
        use("nvidia-smi.txt", self.from_plain)
        use("nvidia-smi-topo.txt", self.from_topology)
        use("nvidia-smi-nvlink-s.txt", self.from_nvlink_status)
        use("nvidia-smi-L.txt", lambda text: self.indexed_sources.append(
            ("nvidia-smi-L.txt", parse_gpu_list(text, "nvidia-smi-L.txt"))))
        use("nvidia-smi-topo-p2p.txt", lambda text: setattr(facts, "p2p_read", parse_topo_p2p(text)))
        use("cuda-p2p.txt", self.from_cuda_samples)
        use("dmesg.txt", self.kernel_log)
        use("lspci-vv.txt", lambda text: setattr(facts, "pci_devices", parse_lspci(text)))
        facts.gpus = merge_gpu_sources(self.gpu_sources, facts.gpu_probe_error)
        facts.gpus = attach_indexed_sources(facts.gpus, self.indexed_sources)
        if facts.sources.get("nvidia-smi-nvlink-s.txt", "").startswith("parsed") or any(
                source.startswith("parsed as nvidia-smi-nvlink-s.txt") for source in facts.sources.values()):
            for gpu in facts.gpus or []:  # the capture was read: a GPU it does not list has no NVLink
                if gpu.index not in self.nvlinks_cut:
                    gpu.nvlinks = [] if gpu.nvlinks is None else gpu.nvlinks
        if facts.gpus is None:
            facts.gpus = _gpus_named_by_host(facts)
        if facts.kernel_log:  # a reset named only by UUID is tied to its GPU now that the GPUs are known
            mark_history(facts.kernel_log, {gpu.uuid.lower(): gpu.bus_id for gpu in facts.gpus or []
                                            if gpu.uuid and gpu.bus_id},
                         thresholds("xid_history")["same_load_window_s"])

    def read_host_files(self) -> None:
        """The host, the software stack, the network and the manifest."""
        facts, use = self.facts, self.use
        _use_host_files(facts, use)
        use("torch.json", lambda text: setattr(facts, "torch", software_files.parse_torch_json(text)))
        use("pip-freeze.txt", lambda text: setattr(facts, "pip_packages", software_files.parse_pip_freeze(text)))
        use("ldconfig.txt", lambda text: setattr(facts, "system_libraries", software_files.parse_ldconfig(text)))
        use("env.txt", lambda text: setattr(facts, "env", host_files.parse_env(text)))
        _use_network_files(facts, use)
        use("manifest.json", lambda text: _apply_manifest(facts, text))
        # env.txt is read after the cgroup files: the container verdict combines both.
        facts.host.container, facts.host.container_evidence = host_files.container_of(facts.host, facts.env)

    def note_partial_reads(self) -> None:
        if isinstance(self.files, Bundle):
            for name, what in self.files.partial.items():
                before = self.facts.sources.get(name)
                self.facts.sources[name] = sentence("facts.state.after", state=before, what=what) if before else \
                    sentence("facts.state.read_in_part", what=what)


def build_facts(files: dict[str, str], *, live: bool = False) -> Facts:
    """`files`: {file name: text}, or the `Bundle` read_bundle returns (which also says what it did not read)."""
    builder = _FactsBuilder(files, live)
    builder.read_gpu_files()
    builder.read_host_files()
    builder.note_partial_reads()
    return builder.facts


# ValueErrors raised by Python itself (int(), unpacking, strptime …), not by a parser's own sentence.
_PYTHON_VALUE_ERRORS = re.compile(r"invalid literal for|could not convert|values to unpack|math domain error|"
                                  r"is not in list|substring not found|does not match format|unconverted data|"
                                  r"Invalid isoformat|cannot convert|out of range|Exceeds the limit")


def _parse_failure(error: Exception) -> Said | str:
    """A parser's own sentence (a ParseFailure; another ValueError's text, as Python wrote it), or one sentence about
    the file for anything else it raised."""
    if isinstance(error, ParseFailure):
        return error.said
    if isinstance(error, ValueError) and str(error) and not _PYTHON_VALUE_ERRORS.search(str(error)):
        return str(error)  # json's `Expecting value: line 1 column 1 (char 0)`: quoted as it is
    return said("facts.parse.layout", error=type(error).__name__)


def _gpus_named_by_host(facts: Facts) -> list[GpuFacts] | None:
    """Without any driver-side list, the GPUs lspci or the kernel log name (neither is namespaced per container,
    so they are used only when nothing else names GPUs)."""
    from_lspci = [GpuFacts(index=0, bus_id=device.address, name=_lspci_product(device.description),
                           pcie_width_current=device.link_status[1] if device.link_status else None,
                           pcie_width_max=device.link_cap[1] if device.link_cap else None, source="lspci-vv.txt")
                  for device in facts.pci_devices or [] if device.is_nvidia_gpu]
    named = {event.bus_id for event in facts.kernel_log or []
             if event.kind in ("xid", "fallen_off_bus") and event.bus_id}
    from_log = [GpuFacts(index=0, bus_id=bus_id, source="dmesg.txt") for bus_id in sorted(named)]
    gpus = merge_gpu_sources([(name, found) for name, found in (("lspci-vv.txt", from_lspci), ("dmesg.txt", from_log))
                              if found], None)
    return gpus or None


def _lspci_product(description: str) -> str:
    """`3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)` → `NVIDIA H100 SXM5 80GB`."""
    bracket = re.search(r"\[([^\]]+)\]\s*(?:\(rev [0-9a-f]+\))?\s*$", description)
    return f"NVIDIA {bracket.group(1)}" if bracket else description.split(": ", 1)[-1]


def _apply_kernel_log(facts: Facts, text: str, name: str, line_numbers: list[int] | None) -> None:
    """Every kernel log is read (dmesg, `journalctl -k`, syslog, kern.log of one machine): their events are kept in
    the order the files come, a line that two of them hold (dmesg and `journalctl -k` of one boot) counted once.
    `line_numbers`: where a streamed log's kept lines were in the whole file (bundle/reader.py)."""
    lines = text.splitlines()
    numbered = [(name, line_numbers[index] if line_numbers and index < len(line_numbers) else index + 1, line)
                for index, line in enumerate(lines)]
    events = parse_kernel_log(numbered)
    known = {_message_of(event) for event in facts.kernel_log or []}
    facts.kernel_log = (facts.kernel_log or []) + [event for event in events if _message_of(event) not in known]
    facts.kernel_log_readable = True


def _message_of(event) -> tuple:
    """What one kernel message is, whichever tool printed it (dmesg's `[ 12.3]`, journalctl's date and host)."""
    start = event.line.find("NVRM:")
    start = start if start >= 0 else max(event.line.find("nvidia-nvswitch"), event.line.find("pcieport"), 0)
    return event.kind, event.line[start:]


def _apply_manifest(facts: Facts, text: str) -> None:
    manifest = json.loads(text)
    if not isinstance(manifest, dict):
        raise ParseFailure("parse.manifest.not_object")
    host = manifest.get("host")
    facts.host.hostname = facts.host.hostname or (host if isinstance(host, str) and host.strip() else None)
    dmesg = manifest.get("files", {}).get("dmesg.txt", {})
    if dmesg and not dmesg.get("collected"):
        facts.kernel_log_readable = False


def _use_host_files(facts: Facts, use: Callable) -> None:
    host = facts.host

    def meminfo(text: str) -> None:
        host.memory_total_bytes = host_files.parse_meminfo(text)["MemTotal"]

    def cpuinfo(text: str) -> None:
        host.cpu_count, host.cpu_model, host.sockets = host_files.parse_cpuinfo(text)

    def df(text: str) -> None:
        host.disks = host_files.parse_df(text)
        shm = next((disk for disk in host.disks if disk.mount == "/dev/shm"), None)
        host.shm_total_bytes = shm.size_bytes if shm else host.shm_total_bytes

    def cgroup(text: str) -> None:
        sections = host_files.split_sections(text)
        host.cgroup_memory_limit_bytes, host.cgroup_cpu_limit, _runtime = host_files.parse_cgroup_limits(sections)
        host.container, host.container_evidence = host_files.container_from_cgroup(sections)
        # Last: a corrupt cpuset list makes the file an input error, the limits above are kept.
        host.cgroup_cpuset, host.cgroup_cpuset_count = host_files.parse_cpuset(sections)

    use("meminfo.txt", meminfo)
    use("cpuinfo.txt", cpuinfo)
    use("df.txt", df)
    use("cgroup.txt", cgroup)
    use("ulimit.txt", lambda text: setattr(host, "memlock_limit_bytes", host_files.parse_memlock(text)))
    use("uptime.txt", lambda text: setattr(host, "uptime_s", host_files.parse_uptime(text)))
    use("cmdline.txt", lambda text: setattr(host, "kernel_cmdline", text.strip()))
    use("modules.txt", lambda text: setattr(host, "kernel_modules", host_files.parse_modules(text)))


def _use_network_files(facts: Facts, use: Callable) -> None:
    def sysfs(text: str) -> None:
        sections = host_files.split_sections(text)
        ports = network_files.parse_ib_sysfs(sections)
        if ports:
            facts.ib_ports = ports
        facts.net_interfaces = network_files.parse_net_sysfs(sections)

    def ibv(text: str) -> None:
        ports = network_files.parse_ibv_devinfo(text)
        if facts.ib_ports is None:
            facts.ib_ports = ports

    def ip_addr(text: str) -> None:
        addresses = network_files.parse_ip_addr(text)
        for interface in facts.net_interfaces or []:
            interface.addresses = addresses.get(interface.name, [])

    use("sysfs.txt", sysfs)
    use("ibv_devinfo.txt", ibv)
    use("ip-addr.txt", ip_addr)
    use("nvidia-imex-ctl.txt", lambda text: setattr(facts, "imex", parse_imex_ctl(text)))
    use("imex-channels.txt",
        lambda text: setattr(facts, "imex_channels", parse_imex_channels(host_files.split_sections(text))))
    use("imex-service.txt", lambda text: setattr(facts, "imex_service", parse_imex_service(text)))


def merge_gpu_sources(sources: list[tuple[str, list[GpuFacts]]], probe_error: str | None) -> list[GpuFacts] | None:
    """One GpuFacts per bus id; the first source's value wins, later ones fill what it lacks."""
    if not sources:
        return [] if probe_error else None
    merged: dict[str, GpuFacts] = {}
    for name, gpus in sources:
        listed: set[str] = set()
        for gpu in gpus:
            existing = merged.get(gpu.bus_id)
            if existing is None:
                merged[gpu.bus_id] = dataclasses.replace(gpu)
            else:
                if gpu.bus_id in listed:  # one file lists the GPU twice: neither reading may hide the other's fault
                    _take_worst(existing, gpu)
                _fill(existing, gpu, name)
            listed.add(gpu.bus_id)
    gpus = sorted(merged.values(), key=lambda gpu: gpu.bus_id)
    for index, gpu in enumerate(gpus):
        gpu.index = index  # NVML's order is PCI bus order
    return gpus


def attach_indexed_sources(gpus: list[GpuFacts] | None, sources: list[tuple[str, list[GpuFacts]]]
                           ) -> list[GpuFacts] | None:
    """GPUs named by index (and UUID) only: matched by UUID, else by index; new ones join without a bus id."""
    if not sources:
        return gpus
    merged = list(gpus or [])
    for name, named in sources:
        for gpu in named:
            existing = next((known for known in merged if gpu.uuid and known.uuid == gpu.uuid), None) or \
                next((known for known in merged if known.index == gpu.index), None)
            if existing is None:
                merged.append(dataclasses.replace(gpu))
            else:
                _fill(existing, gpu, name)
    return sorted(merged, key=lambda gpu: gpu.index) if merged or gpus is not None else None


_WORSE_HIGHER = ("pcie_replay_count", "ecc_corrected_volatile", "ecc_uncorrected_volatile", "ecc_corrected_aggregate",
                 "ecc_uncorrected_aggregate", "retired_pages_sbe", "retired_pages_dbe", "remapped_rows_correctable",
                 "remapped_rows_uncorrectable", "temperature_c", "temperature_memory_c")
_WORSE_TRUE = ("retired_pages_pending", "remap_pending", "remap_failure", "ecc_pending", "mig_pending")
_WORSE_LOWER = ("pcie_gen_current", "pcie_width_current")
"""Fields of one GPU listed twice in one file, taken from the worse reading: a count of errors or a temperature at
its highest, a pending or failed state where either says so, a link at its narrowest, an InfoROM invalid where either
says so; the others are the first reading's (`_fill`)."""


def _take_worst(existing: GpuFacts, gpu: GpuFacts) -> None:
    for names, pick in ((_WORSE_HIGHER, max), (_WORSE_TRUE, max), (_WORSE_LOWER, min)):
        for name in names:
            values = [value for value in (getattr(existing, name), getattr(gpu, name)) if value is not None]
            setattr(existing, name, pick(values) if values else None)
    if gpu.inforom_valid is False:
        existing.inforom_valid = False
    if gpu.clock_event_reasons:
        existing.clock_event_reasons = (existing.clock_event_reasons or frozenset()) | gpu.clock_event_reasons


def _fill(existing: GpuFacts, gpu: GpuFacts, name: str) -> None:
    for field in dataclasses.fields(GpuFacts):
        if field.name in ("index", "bus_id", "error_fields", "lost", "source"):
            continue
        if getattr(existing, field.name) is None and getattr(gpu, field.name) is not None:
            setattr(existing, field.name, getattr(gpu, field.name))
    existing.lost = existing.lost or gpu.lost
    existing.error_fields = sorted(set(existing.error_fields) | set(gpu.error_fields))
    existing.source = f"{existing.source}, {name}" if name not in existing.source else existing.source

"""What the log readers saw, as typed facts: `LogFacts` (one field per reader, None where that reader did not run).

Facts only: counts, the first lines of each kind, small tables, each fact with the lines it rests on (`Line`: file,
line number, text). The readers that fill them are facts/*_reader.py; what the facts mean for the job is judged in
checks/ (nccl_logs, network_logs, torch_logs, software, nccl_tests, host, host_logs, dcgm_diag, k8s_node).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields

from gpuready.facts import nccl_log, nccl_tests, torch_errors
from gpuready.facts.dcgm_diag import DiagRun
from gpuready.facts.host_log import ContainerRequirement, OomKill, ShmError, SigKill
from gpuready.facts.k8s_node import PluginError
from gpuready.facts.log_lines import Line
from gpuready.facts.nic_lines import NicLineFacts
from gpuready.facts.step_times import Series, StepTimeFacts

MAX_EVIDENCE = 5
"""Lines a reader keeps per kind of line: enough to see the pattern, few enough to read."""


@dataclass(kw_only=True)
class LineGroup:
    """A count of one kind of line and the first of them."""
    count: int = 0
    """Lines of this kind seen."""
    lines: list[Line] = field(default_factory=list)
    """The first MAX_EVIDENCE of them, each once."""
    first_seq: int = -1
    """Where the first of them came among all the lines the reader was fed (which came first: the root cause)."""

    def add(self, line: Line, seq: int) -> None:
        if self.count == 0:
            self.first_seq = seq
        self.count += 1
        if len(self.lines) < MAX_EVIDENCE and all(line is not kept for kept in self.lines):
            self.lines.append(line)


# ------------------------------------------------------------------------------------------------------ NCCL_DEBUG

@dataclass(kw_only=True)
class UnroutableInterfaces:
    """The interfaces one host's NCCL chose that cannot reach another node."""
    interfaces: dict[str, str] = field(default_factory=dict)
    """`name:address` → why not (`loopback`, `docker_bridge`, `libvirt_bridge`, `docker_network_bridge`, `veth`,
    `link_local`: the catalogue's `nccl_log.iface.<why>`)."""
    lines: LineGroup = field(default_factory=LineGroup)
    """The lines that name them."""


@dataclass(kw_only=True)
class CommTransports:
    """One communicator (init.cc's `commId`, else the `nranks` of its Init line) and what its channels ran over."""
    nranks: int = 0
    hosts: dict[str, None] = field(default_factory=dict)
    """The hosts whose ranks printed its Init line, in order."""
    kinds: dict[str, Line] = field(default_factory=dict)
    """Transport (`P2P`, `SHM`, `NET/IB`, `NET/Socket`, `NET/<plugin>`) → its first channel line."""
    gdr: dict[bool, Line] = field(default_factory=dict)
    """Whether an RDMA NET channel (not NET/Socket) said `/GDRDMA` (True) or not (False) → its first line."""


@dataclass(kw_only=True)
class NcclLogFacts:
    """NCCL_DEBUG=INFO/WARN logs, one rank's or many ranks' interleaved, from one host or many (bounded tables)."""
    versions: dict[tuple, tuple[str, Line]] = field(default_factory=dict)
    """(host, pid) → (NCCL version, the line that says it)."""
    proc_ranks: dict[tuple, set[int]] = field(default_factory=dict)
    """(host, pid) → the global ranks it holds (from `comm … rank r nranks n` and launcher prefixes)."""
    rank_host: dict[int, str] = field(default_factory=dict)
    """Global rank → its host."""
    nranks: int = 0
    """The largest `nranks` any communicator reported."""
    hosts: dict[str, None] = field(default_factory=dict)
    """The hosts the lines name, in order."""
    unroutable: dict[str, UnroutableInterfaces] = field(default_factory=dict)
    """Host (`?` where unnamed) → the interfaces NCCL chose there that cannot reach another node."""
    host_address: dict[str, tuple[str, Line]] = field(default_factory=dict)
    """Host → its first usable IPv4 address for NCCL sockets, and the line."""
    ib_hosts: dict[str, Line] = field(default_factory=dict)
    """Hosts where NCCL uses InfiniBand/RoCE (`NET/IB : Using [0]mlx5_0`), with the line."""
    ib_missing: dict[str | None, dict[str, LineGroup]] = field(default_factory=dict)
    """Host → why NCCL found no IB device (`libibverbs`, `open_device`, `no_device`, `no_active_port`) → lines."""
    ipoib: dict[str, tuple[str, Line]] = field(default_factory=dict)
    """Host (`?` where unnamed) → an IPoIB interface NCCL's sockets use there (`ib0`), and the line."""
    ib_completion: dict[int, LineGroup] = field(default_factory=dict)
    """ibv_wc_status of the InfiniBand work completions that failed (`Got completion … with error 4`) → lines."""
    ib_plugin: dict[str, Line] = field(default_factory=dict)
    """Hosts (`?` where unnamed) where NCCL loaded an InfiniBand/RoCE net plugin (`NCCL RDMA Plugin`, `IBext`)."""
    no_interface: dict[str | None, dict[str, LineGroup]] = field(default_factory=dict)
    """Host → why NCCL had no IP interface for its sockets (`bootstrap`, `socket`, `ib_oob`, `family`) → lines."""
    env: dict[str, tuple[str, Line]] = field(default_factory=dict)
    """NCCL_* variable → (value, the line saying it was set by the environment)."""
    pairs: dict[tuple[int, int], dict[str, tuple[Line, str | None]]] = field(default_factory=dict)
    """(source rank, destination rank) → transport (`P2P`, `SHM`, `NET/IB`, …) → (its first line, host)."""
    transport_lines: dict[str, LineGroup] = field(default_factory=dict)
    """Transport → the lines of channels that use it."""
    comms: dict[str, CommTransports] = field(default_factory=dict)
    """Communicator (`0xd8289d3e6e217d26`, or `nranks=16` before NCCL printed commId) → its transports."""
    gdr_off: dict[str, tuple[str | None, Line]] = field(default_factory=dict)
    """Host (`?` where unnamed) → (why NCCL turned GPUDirect RDMA off: `no module`, `distance 8 > 5`; the line)."""
    ofi_provider: dict[str, tuple[str, Line]] = field(default_factory=dict)
    """Host (`?` where unnamed) → the libfabric provider aws-ofi-nccl selected there (`efa`, `cxi`), and the line."""
    link_layers: dict[str, Line] = field(default_factory=dict)
    """`IB`, `RoCE` (the link layer after a `NET/IB : Using [0]mlx5_0:1/RoCE` device) → the first line."""
    p2p_unavailable: LineGroup = field(default_factory=LineGroup)
    """`P2P is disabled between …` / `P2P not available` lines."""
    proc_phase: dict[tuple, tuple[str, Line]] = field(default_factory=dict)
    """(host, pid, dev) → (`p2p`, line) after a P2P channel set-up, (`done`, line) after Init COMPLETE."""
    shm: dict[str | None, LineGroup] = field(default_factory=dict)
    """Host → NCCL's shared-memory errors (`Error while creating shared memory segment`, `failed to extend`)."""
    shm_sizes: dict[str | None, set[int]] = field(default_factory=dict)
    """Host → the segment sizes (bytes) NCCL failed to create."""
    shm_errors: dict[str | None, set[str]] = field(default_factory=dict)
    """Host → the errors it gave (`No space left on device`)."""
    connect: dict[str | None, LineGroup] = field(default_factory=dict)
    """Host → its failed socket connections to other ranks."""
    connect_peers: dict[str | None, set[str]] = field(default_factory=dict)
    """Host → the peers (`address:port`) it could not connect to."""
    connect_errors: dict[str | None, set[str]] = field(default_factory=dict)
    """Host → the connection errors (`Connection refused`)."""
    connect_final: dict[str | None, bool] = field(default_factory=dict)
    """Host → True where a connection failed for good (not `retrying`)."""
    secondary: dict[str, LineGroup] = field(default_factory=dict)
    """`SocketError`, `RemoteExited`, `ResultError` → lines: errors that follow another (a peer gone)."""
    result_codes: dict[str, None] = field(default_factory=dict)
    """The ncclResult codes named (`ncclSystemError`), in order."""
    timeouts: LineGroup = field(default_factory=LineGroup)
    """Watchdog timeouts quoted in NCCL's log."""
    warns: dict[str, LineGroup] = field(default_factory=dict)
    """Other WARN messages, numbers and addresses blanked (one key per kind) → lines."""
    warns_dropped: int = 0
    """WARN lines of kinds past the most kept."""
    lines_fed: int = 0
    """Lines offered to the reader."""

    def rank_of(self, line: Line) -> int | None:
        """The global rank that printed the line: its launcher prefix, else the one rank its process holds."""
        event = nccl_log.parse_line(line.text)
        if event is None:
            return None
        if event.launcher_rank is not None:
            return event.launcher_rank
        ranks = self.proc_ranks.get((event.host, event.pid))
        return next(iter(ranks)) if ranks and len(ranks) == 1 else None

    def ranks_of(self, host: str | None, pid: int | None) -> list[int]:
        return sorted(self.proc_ranks.get((host, pid), ()))

    @staticmethod
    def host_of(line: Line) -> str | None:
        event = nccl_log.parse_line(line.text)
        return event.host if event is not None else None

    @staticmethod
    def level_of(line: Line) -> str | None:
        """INFO/WARN/TRACE where the line is one of NCCL's own log lines, else None."""
        event = nccl_log.parse_line(line.text)
        return event.level if event is not None else None

    @staticmethod
    def message_of(line: Line) -> str:
        event = nccl_log.parse_line(line.text)
        if event is None or not event.message or event.level is None:  # not NCCL's own `NCCL WARN` line (torch
            return line.quoted()[2]  # quoting NCCL's last error, say): the line as the evidence quotes it, cut
        return event.message

    @staticmethod
    def lacks_kernels(line: Line) -> bool:
        """NCCL's `Cuda failure 'invalid device function'`: its kernels lack the GPU's architecture."""
        mismatch = torch_errors.parse_version_mismatch(line.text)
        return mismatch is not None and mismatch.kind == "nccl_arch"


# ------------------------------------------------------------------------------------------------- PyTorch errors

@dataclass(kw_only=True)
class NcclErrorRecord:
    """An NCCL error as PyTorch raised it, with the lines that complete it (`Last error:` and its text)."""
    line: Line
    """The line that names it."""
    lines: list[Line]
    """It and the lines that complete it."""
    rank: int | None
    """The rank whose output it is (`[rank3]:`), where the line says."""
    kind: str | None
    """`ncclSystemError`, `ncclRemoteError`, … (None where no line named one)."""
    where: str | None
    """The call or file:line torch names (`ProcessGroupNCCL.cpp:1970`)."""
    version: str | None
    """The NCCL version torch names (`NCCL version 2.19.3`)."""
    last_error: str | None
    """The text after `Last error:`."""
    order: int
    """Its position among the lines fed."""
    last_number: int
    """The line number of its last line (the next within three lines may complete it)."""

    def last_error_lacks_kernels(self) -> bool:
        """The `Last error:` is NCCL's `invalid device function`: its kernels lack the GPU's architecture."""
        cause = torch_errors.parse_version_mismatch(self.last_error) if self.last_error else None
        return cause is not None and cause.kind == "nccl_arch"

    def broken_socket(self) -> tuple[str | None, str] | None:
        """(peer address or None, error) where the `Last error:` is a socket to another rank that broke."""
        return torch_errors.parse_peer_socket(self.last_error) if self.last_error else None


@dataclass(kw_only=True)
class RankFailure:
    """One entry of torchrun's `Failures:` or `Root Cause (first observed failure):` block."""
    index: str | None
    """Its `[N]:` number."""
    root: bool
    """In the `Root Cause` block."""
    lines: list[Line] = field(default_factory=list)
    """Its `[N]:` line and its field lines."""
    host: str | None = None
    """The host the rank ran on."""
    rank: int | None = None
    """The global rank."""
    local_rank: int | None = None
    """The rank on its host."""
    exitcode: int | None = None
    """The exit code; negative: killed by that signal (-9 SIGKILL)."""
    pid: int | None = None
    """The rank's process."""
    traceback: str | None = None
    """torchrun's `traceback :` field, cut at 300 characters."""
    time: str | None = None
    """When it failed, as torchrun printed it."""

    @property
    def signal(self) -> str | None:
        return signal_name(self.exitcode)


def signal_name(exitcode: int | None) -> str | None:
    """`SIGKILL` for an exit code of -9 (torchrun's negative codes), None for a plain exit code."""
    return torch_errors.SIGNALS.get(exitcode) if exitcode is not None else None


@dataclass(kw_only=True)
class TorchLogFacts:
    """PyTorch-distributed errors: watchdog timeouts, NCCL errors, CUDA OOM, version mismatches, rendezvous errors,
    torchrun's failure summary and NCCL flight-recorder dumps (bounded lists)."""
    timeouts: dict[int, tuple[torch_errors.WatchdogTimeout, Line, int]] = field(default_factory=dict)
    """Rank → its lowest timed-out SeqNum (the first collective it was stuck in), the line, input order."""
    timeout_lines: list[Line] = field(default_factory=list)
    """The first watchdog-timeout lines."""
    status: dict[int, tuple[torch_errors.WorkStatus, Line]] = field(default_factory=dict)
    """Rank → the watchdog's `last enqueued / completed` status line."""
    heartbeats: list[tuple[torch_errors.HeartbeatTimeout, Line]] = field(default_factory=list)
    """The heartbeat monitor's `Heartbeat monitor timed out!` / `watchdog got stuck for N seconds` lines (the
    watchdog thread hung), the first few."""
    ranks_seen: set[int] = field(default_factory=set)
    """Every rank a line names."""
    nccl_errors: list[NcclErrorRecord] = field(default_factory=list)
    """NCCL errors torch raised, in order."""
    p2p: list[Line] = field(default_factory=list)
    """`peer access is not supported` lines."""
    cuda_errors: list[tuple[torch_errors.CudaError, list[Line], int]] = field(default_factory=list)
    """(the CUDA error a rank or its NCCL watchdog stopped on, its lines, input order), one per error, rank and host."""
    ooms: list[tuple[int | None, torch_errors.CudaOom, Line, int]] = field(default_factory=list)
    """(rank, CUDA out of memory, line, input order)."""
    gloo_timeouts: list[tuple[int | None, torch_errors.GlooTimeout, Line]] = field(default_factory=list)
    """(rank, gloo's `Timed out waiting …ms`, line)."""
    versions: list[tuple[torch_errors.VersionMismatch, Line]] = field(default_factory=list)
    """Driver / CUDA / architecture / NCCL mismatches, each with its line."""
    torch_cuda: tuple[str, Line] | None = None
    """The CUDA the torch wheel was built for (`torch==2.1.0+cu121` → `12.1`), and the line."""
    nccl_versions: dict[str, Line] = field(default_factory=dict)
    """NCCL_DEBUG banners (`2.4.8+cuda10.2`) → line: the NCCL a software.nccl finding names."""
    network: list[tuple[torch_errors.NetworkError, Line]] = field(default_factory=list)
    """Rendezvous / TCPStore connection errors."""
    answering: dict[str, Line] = field(default_factory=dict)
    """Addresses an NCCL INFO line shows in use (that host is up) → line."""
    failures: list[RankFailure] = field(default_factory=list)
    """torchrun's failure entries, in order."""
    elastic_failed: list[tuple[torch_errors.ElasticFailed, Line, int]] = field(default_factory=list)
    """The elastic agent's `failed (exitcode: …) local_rank: …` lines, with input order."""
    closing: list[Line] = field(default_factory=list)
    """`Sending process … closing signal SIGTERM` lines."""
    dumps: list[torch_errors.FlightRecorderDump] = field(default_factory=list)
    """NCCL flight-recorder dumps read (JSON)."""
    pickles: list[tuple[str, Line | None]] = field(default_factory=list)
    """Flight-recorder dumps in pickle form (never unpickled): (file, line)."""

    @staticmethod
    def rank_of(line: Line) -> int | None:
        """The rank whose output the line is (`[rank3]:`, `[Rank 3]`)."""
        return torch_errors.line_rank(line.text)


# ----------------------------------------------------------------------------------------------------- nccl-tests

@dataclass(kw_only=True)
class NcclTestsRun:
    """One run of an nccl-tests binary (all_reduce_perf …) as its output shows it."""
    source: str
    """The file it is in."""
    test: str | None = None
    """The collective the `# Collective test starting:` line names."""
    header: nccl_tests.Header | None = None
    """The `# nThread … minBytes … maxBytes …` line: how the binary was run."""
    ranks: dict[int, nccl_tests.RankLine] = field(default_factory=dict)
    """Rank → its `# Rank` line (bounded)."""
    rank_lines: int = 0
    """`# Rank` lines seen."""
    hosts: set[str] = field(default_factory=set)
    """The hosts the `# Rank` lines name (bounded)."""
    models: Counter = field(default_factory=Counter)
    """GPU model → ranks on it."""
    columns: tuple[str, ...] | None = None
    """The column header's names, where the output printed one (older nccl-tests have fewer columns)."""
    rows: int = 0
    """Result rows read."""
    best: tuple[nccl_tests.Row, Line] | None = None
    """The row with the highest busbw at sizes of at least [nccl] min_judged_bytes."""
    largest: list[tuple[nccl_tests.Row, Line]] = field(default_factory=list)
    """The rows at the largest sizes (quoted with the best)."""
    max_size: int = 0
    """The largest size (bytes) of any row."""
    shape: tuple[str | None, int | None, float | None] | None = None
    """(redop, root, busbw/algbw) of the row with the highest algbw, to name the collective."""
    shape_algbw: float = -1.0
    """The highest algbw (GB/s) of any row: the row `shape` is taken from."""
    skipped: int = 0
    """Lines that looked like rows but did not parse."""
    skipped_lines: list[Line] = field(default_factory=list)
    """The first of those lines."""
    avg: tuple[float, Line] | None = None
    """The footer's `# Avg bus bandwidth` and its line."""
    closed: bool = False
    """The footer was seen: a further row starts another run."""

    def collective(self) -> tuple[str | None, int | None, bool]:
        """(collective, ranks, whether the rank count is inferred from busbw/algbw rather than read in the header)."""
        redop, root, ratio = self.shape or (None, None, None)
        header_ranks = self.rank_lines or None
        collective = self.test or nccl_tests.infer_collective(redop, root, ratio, header_ranks)
        if header_ranks:
            return collective, header_ranks, False
        if collective and ratio is not None and (ranks := nccl_tests.ranks_from_ratio(collective, ratio)):
            return collective, ranks, True
        return collective, None, False

    def gpus_by_bus(self, gpus: list) -> list | None:
        """The GPUs (facts.types.GpuFacts) the `# Rank` lines name by PCI bus, in rank order; None unless every rank
        line was kept and each names a different GPU of `gpus`."""
        if not self.ranks or len(self.ranks) != self.rank_lines:
            return None
        by_bus = {bus: gpu for gpu in gpus if (bus := nccl_tests.bus_number(gpu.bus_id or "")) is not None}
        matched = [by_bus.get(rank.bus_number()) for rank in self.ranks.values()]
        if all(matched) and len({id(gpu) for gpu in matched}) == len(matched):
            return matched
        return None


MAX_NCCL_TESTS_RUNS = 32
"""Runs of nccl-tests kept per input set; rows of later runs still count for #wrong and out-of-bounds."""


@dataclass(kw_only=True)
class NcclTestsFacts:
    """nccl-tests output: the runs (bandwidth per size) and the data checks."""
    runs: list[NcclTestsRun] = field(default_factory=list)
    """The first runs (bounded)."""
    runs_dropped: int = 0
    """Runs past the most kept (their rows still count for #wrong and out-of-bounds)."""
    wrong: list[tuple[nccl_tests.Row, Line]] = field(default_factory=list)
    """The first rows with #wrong > 0."""
    wrong_count: int = 0
    """Rows with #wrong > 0, all runs."""
    out_of_bounds_bad: list[tuple[int, Line]] = field(default_factory=list)
    """(value, line) of `# Out of bounds values : N FAILED` footers with N > 0."""
    out_of_bounds_bad_count: int = 0
    """Footers with out-of-bounds values, all runs."""
    out_of_bounds_ok: Line | None = None
    """The first `# Out of bounds values : 0 OK` footer."""
    rows_checked: int = 0
    """Rows whose data was checked (`-c 1`)."""
    rows_unchecked: int = 0
    """Rows printed without a data check (`#wrong` is `N/A`)."""


# ----------------------------------------------------------------------------------------------------------- host

@dataclass(kw_only=True)
class HostLogFacts:
    """Kernel OOM-killer reports, SIGKILLed processes, DataLoader shared-memory errors, the container toolkit refusing
    an image whose CUDA/driver requirement the host does not meet."""
    requirements: list[tuple[ContainerRequirement, Line]] = field(default_factory=list)
    """The container toolkit's `unsatisfied condition: cuda>=X` lines."""
    toolkit_errors: list[tuple[str, Line]] = field(default_factory=list)
    """The container toolkit's `initialization error: <reason>` (it could not reach the host's driver)."""
    ooms: list[tuple[OomKill, Line]] = field(default_factory=list)
    """The first OOM-killer lines."""
    oom_lines: int = 0
    """OOM-killer lines seen."""
    sigkills: list[tuple[SigKill, Line]] = field(default_factory=list)
    """Processes a launcher or DataLoader reports killed by SIGKILL (one per pid)."""
    shm: list[tuple[ShmError, Line]] = field(default_factory=list)
    """DataLoader shared-memory errors (bus error, no space, write failed)."""
    shm_lines: int = 0
    """Shared-memory error lines seen."""


# ------------------------------------------------------------------------------------------------------------ DCGM

@dataclass(kw_only=True)
class DcgmRun:
    """One `dcgmi diag` table."""
    source: str
    """The file it is in."""
    diag: DiagRun
    """Its tests, results and messages (facts/dcgm_diag.py `fold`)."""
    refs: list[Line]
    """Its lines, in order (`diag`'s tests point into them by index)."""


@dataclass(kw_only=True)
class DcgmDiagFacts:
    """`dcgmi diag` tables (DCGM 2.x/3.x summary rows, DCGM 4.x per-GPU rows)."""
    runs: list[DcgmRun] = field(default_factory=list)
    """The tables read (bounded)."""
    runs_dropped: int = 0
    """Tables past the most kept."""


# ----------------------------------------------------------------------------------------------------- Kubernetes

@dataclass(kw_only=True)
class ResourceSection:
    """A node's `Capacity:` or `Allocatable:` block."""
    resources: dict[str, int] = field(default_factory=dict)
    """nvidia.com/* resources and their quantities."""
    others: int = 0
    """Other resources seen (cpu, memory, pods): the block was really read."""
    closed: bool = False
    """A line after it ended it (the block was read whole)."""
    indent: int = 0
    """The header's indentation: a line indented no deeper ends the block."""
    lines: list[Line] = field(default_factory=list)
    """Its header and its nvidia.com/* lines."""


@dataclass(kw_only=True)
class K8sNode:
    """One node of `kubectl describe node` or `-o yaml`."""
    source: str
    """The file it is in."""
    name: str | None = None
    """Its name (`Name:`, `kubernetes.io/hostname`)."""
    labels: dict[str, str] = field(default_factory=dict)
    """Its nvidia.com/* and feature.node.kubernetes.io/* labels."""
    label_lines: list[Line] = field(default_factory=list)
    """The first nvidia.com/gpu* label lines."""
    sections: dict[str, ResourceSection] = field(default_factory=dict)
    """`capacity` / `allocatable` → the block."""
    name_line: Line | None = None
    """The line that names it."""


@dataclass(kw_only=True)
class K8sNodeFacts:
    """Kubernetes node descriptions and the NVIDIA device plugin's log."""
    nodes: list[K8sNode] = field(default_factory=list)
    """The nodes described, in order (bounded)."""
    plugin: list[tuple[PluginError, Line]] = field(default_factory=list)
    """The NVIDIA device plugin's own errors (no NVML in its container, no devices found)."""


# -------------------------------------------------------------------------------------------------------- together

@dataclass(kw_only=True)
class LogFacts:
    """What the log readers among diagnose's inputs saw; a field is None where its reader did not run."""
    nccl: NcclLogFacts | None = None
    """NCCL_DEBUG logs."""
    torch: TorchLogFacts | None = None
    """PyTorch-distributed errors and flight-recorder dumps."""
    nccl_tests: NcclTestsFacts | None = None
    """nccl-tests output."""
    host: HostLogFacts | None = None
    """OOM killer, SIGKILL, DataLoader shared memory."""
    dcgm: DcgmDiagFacts | None = None
    """`dcgmi diag` tables."""
    k8s: K8sNodeFacts | None = None
    """Kubernetes node descriptions and device-plugin logs."""
    nics: NicLineFacts | None = None
    """lspci's ConnectX device lines (flat or tree), per input."""
    steps: StepTimeFacts | None = None
    """Per-rank step times of training logs (diagnose only)."""


def log_facts(readers: list) -> LogFacts:
    """The facts of the log readers among `readers` (facts.log_lines.Reader), each under its name: a reader's `name`
    is its field of LogFacts (the kernel-log reader's lines go to the machine's facts instead)."""
    names = {each.name for each in fields(LogFacts)}
    return LogFacts(**{reader.name: reader.facts() for reader in readers if reader.name in names})

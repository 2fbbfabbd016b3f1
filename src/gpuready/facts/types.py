"""What the machine is, as read from its tools: no judgement here.

Every field is `None` when no source told us (the check that needs it then says `skip`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuready.facts.imex import ImexChannels, ImexDomain
from gpuready.facts.log_facts import LogFacts


@dataclass(kw_only=True)
class GpuProcess:
    pid: int | None
    name: str | None
    kind: str | None = None
    """`C` compute, `G` graphics, `C+G` both (nvidia-smi's Type column)."""
    used_memory_bytes: int | None = None


@dataclass(kw_only=True)
class NvLink:
    link: int
    active: bool | None
    speed_gb_per_s: float | None = None


@dataclass(kw_only=True)
class GpuFacts:
    index: int
    """NVML index: the order of PCI bus ids."""
    bus_id: str | None
    """`0000:3b:00.0`: 4-hex domain, lower case; None for a GPU only named by index (`topo -m`, `nvlink -s`)."""
    uuid: str | None = None
    name: str | None = None
    serial: str | None = None
    vbios: str | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_reserved_bytes: int | None = None
    bar1_total_bytes: int | None = None
    compute_capability: str | None = None
    persistence_mode: bool | None = None
    mig_enabled: bool | None = None
    mig_pending: bool | None = None
    compute_mode: str | None = None
    """`Default`, `Exclusive_Process`, `Exclusive_Thread` or `Prohibited`."""
    ecc_enabled: bool | None = None
    ecc_pending: bool | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    """The limit in force (enforced)."""
    power_default_limit_w: float | None = None
    power_max_limit_w: float | None = None
    temperature_c: float | None = None
    temperature_memory_c: float | None = None
    slowdown_temperature_c: float | None = None
    shutdown_temperature_c: float | None = None
    max_operating_temperature_c: float | None = None
    clock_event_reasons: frozenset[str] | None = None
    """Active clock-event (throttle) reasons by name (facts/clock_reasons.py); their groups are knowledge's."""
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    utilization_gpu_pct: float | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    """The link's maximum: the lower of what the GPU and the host port support."""
    pcie_gen_device_max: int | None = None
    pcie_gen_host_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    pcie_replay_count: int | None = None
    ecc_corrected_volatile: int | None = None
    ecc_uncorrected_volatile: int | None = None
    ecc_corrected_aggregate: int | None = None
    ecc_uncorrected_aggregate: int | None = None
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    inforom_valid: bool | None = None
    fabric_state: str | None = None
    """NVSwitch fabric registration: `Completed`, `In Progress`, `Not Started`, `Not Supported`."""
    fabric_status: str | None = None
    fabric_clique_id: int | None = None
    """The NVLink clique (domain partition) the GPU registered in; 0 where none was assigned."""
    fabric_cluster_uuid: str | None = None
    """The NVLink domain's cluster UUID; all zeros where none was assigned."""
    fabric_health: str | None = None
    """The fabric's health conditions, `bandwidth=Full; route_recovery=False; …` (facts/nvidia_smi_q.py HEALTH_KEYS)."""
    processes: list[GpuProcess] | None = None
    nvlinks: list[NvLink] | None = None
    numa_node: int | None = None
    cpu_affinity: str | None = None
    """CPU list as Linux prints it, `0-15,32-47`."""
    error_fields: list[str] = field(default_factory=list)
    """Fields the tool could not read (`ERR!`, `Unknown Error`, NVML errors other than not-supported)."""
    lost: bool = False
    """The GPU is listed but does not answer (`GPU is lost`, every field unreadable)."""
    source: str = ""
    """The bundle file(s) these facts came from."""

    def source_files(self) -> list[str]:
        """`source` as a list of bundle file names."""
        return [part.strip() for part in self.source.split(",") if part.strip()]


@dataclass(kw_only=True)
class KernelEvent:
    kind: str
    """`xid`, `sxid`, `fallen_off_bus`, `aer`, `iommu` (the DMA domain type), `inforom` (corrupted),
    `driver_load` (the NVIDIA kernel module loaded: `detail` is its version; applies to every GPU),
    `gpu_reset` (one GPU was reset: `bus_id` or `uuid` names it), `fabric_manager` (`detail`: `version_mismatch FM
    DRIVER`, `nothing_to_do` (no NVSwitch for it to manage), `failed` (the service exited)), `cuda_not_ready` (CUDA
    error 802, "system not yet initialized": the NVSwitch fabric is not up), `api_mismatch` (the kernel module refused
    a client of another driver version), `gpu_lost` (NVML's "GPU is lost" or a device handle it cannot get, in any
    program's output), `cuda_ecc` (CUDA's "uncorrectable ECC error encountered" in a job's output),
    `docker_no_gpu_runtime` (Docker has no NVIDIA runtime for `--gpus`), `cuda_bad_ordinal` (a process asked CUDA for
    a device it does not see), `nic` (an mlx5/mlx4 RDMA NIC line: `bus_id` the NIC, `detail` what it says: `fatal`,
    `cmd_timeout`, `module_unplugged`, `module_error <reason>`, `link_down`, `link_up`, `pcie_limited <text>`)."""
    line: str
    bus_id: str | None = None
    code: int | None = None
    """The Xid/SXid number."""
    detail: str = ""
    timestamp_s: float | None = None
    wall_time: str | None = None
    """The wall-clock time as the log printed it (`dmesg -T`, `--time-format iso`, syslog, journalctl)."""
    uuid: str | None = None
    """The GPU's UUID where the line names it (`gpu_reset`)."""
    links: tuple[int, ...] = field(default=(), compare=False)
    """The NVLink numbers an Xid/SXid line names (`Link 13`)."""
    port: str | None = None
    """The NIC port a `nic` event names: its network interface (`ens1f0np0`) or transceiver module (`module 0`)."""
    source: str | None = field(default=None, compare=False)
    """The file the line is in, as given (`dmesg.txt`, `folder/kern.log`)."""
    line_number: int | None = field(default=None, compare=False)
    """1-based, in that file."""
    clock: tuple[str, float] | None = field(default=None, compare=False, repr=False)
    """(clock, seconds) to compare two events of one log: `boot` (kernel seconds), `wall`, `ctime` or `syslog`."""
    superseded_by: "KernelEvent | None" = field(default=None, compare=False, repr=False)
    """The later driver load (any GPU) or reset of this GPU after which this event is history; None while it is
    current. A derived fact (facts/kernel_log.py `mark_history`), set once the GPUs are known."""


@dataclass(kw_only=True)
class Topology:
    gpu_labels: list[str]
    links: dict[tuple[int, int], str]
    """(i, j) → `NV18`, `PIX`, `PXB`, `PHB`, `NODE`, `SYS`, `X` (NVML index order)."""
    cpu_affinity: dict[int, str] = field(default_factory=dict)
    numa_affinity: dict[int, str] = field(default_factory=dict)
    nics: dict[str, dict[int, str]] = field(default_factory=dict)
    """NIC name → GPU index → link type."""
    nic_names: dict[str, str] = field(default_factory=dict)
    """The `NIC Legend`: column label → RDMA device (`NIC0` → `mlx5_0`); empty where the matrix names devices itself."""


@dataclass(kw_only=True)
class PciDevice:
    address: str
    """`0000:3b:00.0`."""
    description: str
    is_nvidia_gpu: bool = False
    is_bridge: bool = False
    acs_enabled: list[str] = field(default_factory=list)
    """ACSCtl flags that are on (`SrcValid+` …)."""
    link_cap: tuple[float, int] | None = None
    """(GT/s, width)."""
    link_status: tuple[float, int] | None = None
    secondary_bus: int | None = None
    subordinate_bus: int | None = None
    """A bridge's downstream bus range, to find the bridges above a GPU."""
    port_type: str | None = None
    """PCIe port type from `Capabilities: [..] Express (v2) <type>`: `Root Port`, `Upstream Port`,
    `Downstream Port`, `Endpoint`, `Legacy Endpoint`, …; None where lspci could not read the capability."""
    device_class: str = ""
    """lspci's class name, the description before `: `: `3D controller`, `Ethernet controller` …"""
    gpus_below: list[str] = field(default_factory=list)
    """A bridge's subtree: the NVIDIA GPUs (addresses) in its downstream bus range, at any depth."""
    switch_upstream: str | None = None
    """A switch downstream port's switch: the address of the upstream port whose secondary bus is this port's bus."""

    @property
    def is_root_port(self) -> bool:
        return self.port_type == "Root Port"


@dataclass(kw_only=True)
class TorchInfo:
    version: str | None = None
    cuda: str | None = None
    """The CUDA torch was built with (`12.8`); None for a CPU build."""
    arch_list: list[str] | None = None
    device_count: int | None = None
    nccl_version: str | None = None
    error: str | None = None
    source: str = ""


@dataclass(kw_only=True)
class IbPort:
    device: str
    port: int
    state: str | None
    """`ACTIVE`, `DOWN`, `INIT` …"""
    rate_gbit_per_s: float | None
    link_layer: str | None = None
    """`InfiniBand` or `Ethernet` (RoCE)."""
    phys_state: str | None = None
    """ibstat's words: `LinkUp`, `Polling`, `Disabled`, `Sleep`, `LinkErrorRecovery` …"""
    hca_type: str | None = None
    """The HCA model (`MT4129`: ibstat's `CA type`, sysfs `hca_type`, ibv_devinfo's vendor_part_id)."""
    numa_node: int | None = None
    """The HCA's NUMA node (sysfs `<dev>/device/numa_node`); None where not captured or the platform says -1."""
    counters: dict[str, int] = field(default_factory=dict)
    """sysfs `counters/` error counters (`link_downed`, `symbol_error` …): totals since boot or reset."""


@dataclass(kw_only=True)
class NetInterface:
    name: str
    speed_mbit_per_s: int | None
    operstate: str | None
    addresses: list[str] = field(default_factory=list)
    is_virtual: bool = False


@dataclass(kw_only=True)
class DiskUsage:
    mount: str
    size_bytes: int
    available_bytes: int
    filesystem: str = ""


@dataclass(kw_only=True)
class HostFacts:
    hostname: str | None = None
    cpu_count: int | None = None
    cpu_model: str | None = None
    sockets: int | None = None
    numa_nodes: int | None = None
    memory_total_bytes: int | None = None
    cgroup_memory_limit_bytes: int | None = None
    cgroup_cpu_limit: float | None = None
    """CPUs the container may use (quota / period)."""
    shm_total_bytes: int | None = None
    disks: list[DiskUsage] | None = None
    memlock_limit_bytes: int | None = None
    """None where unknown; -1 means unlimited."""
    uptime_s: float | None = None
    kernel_cmdline: str | None = None
    container: str | None = None
    """`docker`, `kubernetes`, `containerd`, `podman`, `lxc`, `slurm` or `none` (from the cgroup files)."""
    kernel_modules: set[str] | None = None
    container_evidence: list[str] | None = None
    """What said `container` (`/proc/1/cgroup: kubepods`, `/.dockerenv` …); [] when the cgroup files were read
    and showed none. Environment evidence (KUBERNETES_SERVICE_HOST, NVIDIA_VISIBLE_DEVICES, SLURM_JOB_ID) is
    added by `host_files.container_of`, which needs `Facts.env`."""
    cgroup_cpuset: str | None = None
    """The CPUs the container may run on, as Linux prints them (`0-15`): cpuset.cpus.effective (v2) or
    cpuset.effective_cpus / cpuset.cpus (v1)."""
    cgroup_cpuset_count: int | None = None
    """How many CPUs `cgroup_cpuset` names."""


@dataclass(kw_only=True)
class Facts:
    host: HostFacts = field(default_factory=HostFacts)
    gpus: list[GpuFacts] | None = None
    """None: no source told us; [] : a source said there are none."""
    gpus_announced: int | None = None
    """How many GPUs the driver says are attached (NVML count, nvidia-smi `Attached GPUs`)."""
    gpu_probe_error: str | None = None
    """Why the driver could not be asked (`Driver/library version mismatch` …)."""
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    """The highest CUDA the driver supports (`13.0`)."""
    topology: Topology | None = None
    p2p_read: dict[tuple[int, int], str] | None = None
    """(i, j) → `OK`, `CNS`, `GNS`, `TNS`, `NS`, `NS`…"""
    unnamed_gpus: list[GpuFacts] = field(default_factory=list)
    """GPU sections whose header line (so their bus id) a pasted `-q` cut: their state, tied to no GPU."""
    process_table: list[tuple[int, GpuProcess]] | None = None
    """(nvidia-smi's GPU number, process) per row of plain nvidia-smi's Processes block (it may come without the GPU
    table); None where no such block was read."""
    kernel_log: list[KernelEvent] | None = None
    kernel_log_readable: bool | None = None
    pci_devices: list[PciDevice] | None = None
    torch: TorchInfo | None = None
    pip_packages: dict[str, str] | None = None
    system_libraries: list[str] | None = None
    env: dict[str, str] | None = None
    ib_ports: list[IbPort] | None = None
    imex: ImexDomain | None = None
    """`nvidia-imex-ctl -N` (text or `-j`): the IMEX domain this node sees."""
    imex_channels: ImexChannels | None = None
    """The IMEX channel devices this process sees (`imex-channels.txt`); None where not recorded."""
    imex_service: str | None = None
    """`systemctl is-active nvidia-imex` (`active`, `inactive`, `failed` …); None where not recorded (no systemd)."""
    net_interfaces: list[NetInterface] | None = None
    rendezvous_port_free: bool | None = None
    live: bool = False
    sources: dict[str, str] = field(default_factory=dict)
    """Bundle file → `parsed`, `missing`, or why it could not be used."""
    input_errors: list[tuple[str, str]] = field(default_factory=list)
    """(file, one sentence) for bundle files that could not be parsed."""
    logs: LogFacts | None = None
    """What the log readers saw (NCCL, PyTorch, nccl-tests, DCGM, Kubernetes, host logs: `diagnose`); None where no
    log reader ran (`check`): the checks of logs alone are then not applicable, and give no finding."""

    def container(self) -> tuple[str | None, list[str]]:
        """The container this machine's evidence says it runs in, with every piece of evidence (cgroup files, then
        the environment): a derived fact (`container_of` below)."""
        return container_of(self.host, self.env)


# Where several say so, the one that allocates the GPUs names the container: a Kubernetes pod's path also
# names its runtime (`kubepods/…/cri-containerd-…`), and Docker under Kubernetes leaves /.dockerenv.
_RUNTIME_PRIORITY = ("kubernetes", "slurm", "podman", "docker", "containerd", "lxc", "container")


def most_specific_runtime(runtimes: list[str]) -> str:
    return min(runtimes, key=lambda name: _RUNTIME_PRIORITY.index(name) if name in _RUNTIME_PRIORITY else 99)


def container_from_env(env: dict[str, str] | None) -> tuple[str | None, list[str]]:
    """(runtime, evidence) from the environment: Kubernetes' service variables and the NVIDIA runtime's device list.

    SLURM_JOB_ID alone is not a container: without a Slurm cgroup the job sees every GPU of the node.
    """
    if not env:
        return None, []
    runtime, evidence = None, []
    if "KUBERNETES_SERVICE_HOST" in env:
        runtime = "kubernetes"
        evidence.append("env KUBERNETES_SERVICE_HOST is set")
    if "NVIDIA_VISIBLE_DEVICES" in env:
        runtime = runtime or "container"
        evidence.append(f"env NVIDIA_VISIBLE_DEVICES={env['NVIDIA_VISIBLE_DEVICES'][:80]}")
    return runtime, evidence


def container_of(host: HostFacts, env: dict[str, str] | None) -> tuple[str | None, list[str]]:
    """The container this run is in, with every piece of evidence: the cgroup facts, then the environment.

    (`kubernetes`/`slurm`/`podman`/`docker`/`containerd`/`lxc`/`container`, evidence); (`none`, []) where the
    cgroup files were read and nothing says container; (None, []) where nothing was read. A Slurm job counts only
    with its cgroup (SLURM_JOB_ID is then added as evidence).
    """
    found = [host.container] if host.container not in (None, "none") else []
    evidence = list(host.container_evidence or [])
    env_runtime, env_evidence = container_from_env(env)
    if env_runtime:
        found.append(env_runtime)
        evidence += env_evidence
    if not found:
        return host.container, []
    runtime = most_specific_runtime(found)
    if runtime == "slurm" and env and "SLURM_JOB_ID" in env:
        evidence.append(f"env SLURM_JOB_ID={env['SLURM_JOB_ID'][:20]}")
    return runtime, evidence

"""Tests that kill the mutants of checks/host.py that survived the suite (issue 23, mutation testing; the run and its
module → test-file table are in benchmarks/mutation_score.sh): system RAM against VRAM, CPUs per GPU, NUMA affinity,
/dev/shm, free disk space, locked memory.

The rules are the README's check catalog (host.memory_ratio: warn below 1.5× total VRAM, fail below 0.5×;
host.cpu_per_gpu: warn below 4 CPUs per GPU; host.shm: fail below 512 MiB with 2+ GPUs, warn below 1 GiB per GPU;
host.disk: warn below 10 % and below 50 GB free; host.memlock: warn when not unlimited where RDMA devices exist).
Expected values come from the recorded H200 runs (tests/fixtures/h200-collect, h200-docker-collect), published
figures named in the docstring, or are worked out by hand in the docstring.
"""

from __future__ import annotations

import pytest

from conftest import FIXTURES
from gpuready.evidence.reader import read_bundle
from gpuready.checks.registry import registered_in_order, run_checks
from gpuready.evidence.build import build_facts
from gpuready.facts.types import DiskUsage, Facts, GpuFacts, HostFacts, IbPort, Topology
from gpuready.knowledge import thresholds
from gpuready.model import Status

registered_in_order()  # imports every module of checks/: run_checks(only=…) does not

GIB = 1024**3
MIB = 1024**2
GPU_80G = 80 * GIB
"""An 80 GiB GPU (85,899,345,920 bytes): round, so the ratios below are worked out by hand."""
SAME_FIX = ("Add system memory (or raise the container's memory limit) to at least {} GiB; until then keep DataLoader "
            "workers and pinned buffers small, and avoid CPU offload (ZeRO-Offload / FSDP CPU offload).")
NCCL_TROUBLESHOOTING = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"


def _gpus(count: int, memory: int | None = GPU_80G, **fields) -> list[GpuFacts]:
    return [GpuFacts(index=i, bus_id=f"0000:{0x18 + i:02x}:00.0", memory_total_bytes=memory, **fields)
            for i in range(count)]


def _one(facts: Facts, check_id: str):
    found = run_checks(facts, only=[check_id])
    assert len(found) == 1, [(f.check_id, f.status.value, f.message) for f in found]
    return found[0]


def _recorded(name: str, check_id: str):
    return _one(build_facts(read_bundle(FIXTURES / name)), check_id)


# ------------------------------------------------------------------------------------------- RAM against VRAM

def test_the_recorded_h200_has_less_ram_than_vram_and_warns_with_the_memory_it_needs():
    """tests/fixtures/h200-collect: MemTotal 135,128,870,912 B, one H200 of 150,754,820,096 B.
      RAM  135,128,870,912 / 2^30 = 125 + 911,142,912/1,073,741,824 = 125.85 GiB → "126"
      VRAM 150,754,820,096 / 2^30 = 140 + 430,964,736/1,073,741,824 = 140.40 GiB → "140"
      ratio 125.85 / 140.40 = 0.896 → "0.90×": >= 0.5, < 1.5: warn.
      needed 1.5 × 140.40 = 210.6 → "211" GiB."""
    finding = _recorded("h200-collect", "host.memory_ratio")
    assert finding.status == Status.WARN
    assert finding.message == ("System RAM is 0.90× the total GPU memory, below the 1.5× rule of thumb: checkpoint "
                               "loading, pinned-memory data loaders and CPU offload may run out of host memory.")
    assert (finding.observed, finding.expected) == ("126 GiB system RAM / 140 GiB VRAM = 0.90×", ">= 1.5×")
    assert finding.fix == SAME_FIX.format(211)


def test_a_container_limit_below_ram_is_what_is_judged_and_named():
    """A DGX H100-like box: 8 × 80 GiB = 640 GiB VRAM, 2,048 GiB RAM, but the container may use 512 GiB:
    512 / 640 = 0.80× (warn), named as the container's limit; needed 1.5 × 640 = 960 GiB."""
    facts = Facts(gpus=_gpus(8), host=HostFacts(memory_total_bytes=2048 * GIB, cgroup_memory_limit_bytes=512 * GIB))
    finding = _one(facts, "host.memory_ratio")
    assert finding.status == Status.WARN
    assert finding.message == ("The container's memory limit is 0.80× the total GPU memory, below the 1.5× rule of "
                               "thumb: checkpoint loading, pinned-memory data loaders and CPU offload may run out of "
                               "host memory.")
    assert finding.observed == "512 GiB the container's memory limit / 640 GiB VRAM = 0.80×"
    assert finding.fix == SAME_FIX.format(960)


def test_a_container_limit_equal_to_ram_is_no_limit_and_the_ram_is_named():
    """RAM 1,024 GiB and a cgroup limit of the same 1,024 GiB: the limit takes nothing away, so the message speaks of
    system RAM: 1,024 / 640 = 1.60× >= 1.5: pass."""
    facts = Facts(gpus=_gpus(8), host=HostFacts(memory_total_bytes=1024 * GIB, cgroup_memory_limit_bytes=1024 * GIB))
    finding = _one(facts, "host.memory_ratio")
    assert (finding.status, finding.message) == (Status.PASS, "System RAM is 1.60× the total GPU memory.")
    assert (finding.observed, finding.expected) == ("1,024 GiB system RAM / 640 GiB VRAM = 1.60×", ">= 1.5×")


@pytest.mark.parametrize("ram_gib, status, message", [
    (64, Status.FAIL, "System RAM is only 0.40× the total GPU memory: loading a checkpoint that fills the GPUs will "
                      "not fit in host memory."),
    (80, Status.WARN, "System RAM is 0.50× the total GPU memory, below the 1.5× rule of thumb: checkpoint loading, "
                      "pinned-memory data loaders and CPU offload may run out of host memory."),
    (240, Status.PASS, "System RAM is 1.50× the total GPU memory."),
])
def test_the_ratio_bounds_are_strict(ram_gib, status, message):
    """2 × 80 GiB = 160 GiB VRAM. 64/160 = 0.40 < 0.5: fail; 80/160 = 0.50 is not below 0.5: warn, not fail;
    240/160 = 1.50 is not below 1.5: pass. A fail or warn asks for 1.5 × 160 = 240 GiB."""
    finding = _one(Facts(gpus=_gpus(2), host=HostFacts(memory_total_bytes=ram_gib * GIB)), "host.memory_ratio")
    assert (finding.status, finding.message) == (status, message)
    assert finding.fix == (SAME_FIX.format(240) if status != Status.PASS else None)


def test_gpus_without_a_memory_size_are_not_judged():
    """No GPU reports its memory: there is no VRAM to compare with, so skip (an unknown size is not 1 byte)."""
    finding = _one(Facts(gpus=_gpus(2, memory=None), host=HostFacts(memory_total_bytes=64 * GIB)),
                   "host.memory_ratio")
    assert (finding.status, finding.message) == (Status.SKIP, "GPU memory sizes are not known.")


# ------------------------------------------------------------------------------------------- CPUs per GPU

def test_a_cpuset_of_every_cpu_is_no_restriction():
    """tests/fixtures/h200-docker-collect: 16 logical CPUs, cpuset.cpus.effective 0-15 (16 CPUs), one GPU: the
    cpuset takes nothing away, so the host's CPUs are named: 16 / 1 = 16.0 per GPU >= 4: pass."""
    finding = _recorded("h200-docker-collect", "host.cpu_per_gpu")
    assert (finding.status, finding.message) == (Status.PASS, "16.0 logical CPUs per GPU.")
    assert (finding.observed, finding.expected) == ("16 logical CPUs / 1 GPU(s) = 16.0", ">= 4")


def test_a_cpu_quota_equal_to_the_cpus_is_no_restriction():
    """64 CPUs, a quota of 64.0 CPUs, 8 GPUs: 64 / 8 = 8.0 per GPU, named as the host's CPUs."""
    facts = Facts(gpus=_gpus(8), host=HostFacts(cpu_count=64, cgroup_cpu_limit=64.0))
    finding = _one(facts, "host.cpu_per_gpu")
    assert (finding.status, finding.message) == (Status.PASS, "8.0 logical CPUs per GPU.")
    assert finding.observed == "64 logical CPUs / 8 GPU(s) = 8.0"


@pytest.mark.parametrize("cpus, status, message", [
    (32, Status.PASS, "4.0 logical CPUs per GPU."),
    (16, Status.WARN, "Only 2.0 logical CPUs per GPU: data loading and the Python side of each rank will starve the "
                      "GPUs."),
])
def test_four_cpus_per_gpu_is_enough(cpus, status, message):
    """8 GPUs: 32 CPUs are 4.0 per GPU, not below 4: pass; 16 CPUs are 2.0: warn. Both expect '>= 4'."""
    finding = _one(Facts(gpus=_gpus(8), host=HostFacts(cpu_count=cpus)), "host.cpu_per_gpu")
    assert (finding.status, finding.message, finding.expected) == (status, message, ">= 4")


def test_a_cpuset_of_forty_characters_is_shown_whole():
    """'0,2,4,6,8,' (10 characters) + '10,12,…,26' (9 numbers of 2 digits and 8 commas: 26) + ',128' (4) = 40
    characters, 5 + 9 + 1 = 15 CPUs of the host's 64; 2 GPUs: 15 / 2 = 7.5 per GPU, pass."""
    cpuset = "0,2,4,6,8,10,12,14,16,18,20,22,24,26,128"
    assert len(cpuset) == 40
    facts = Facts(gpus=_gpus(2), host=HostFacts(cpu_count=64, cgroup_cpuset=cpuset, cgroup_cpuset_count=15))
    finding = _one(facts, "host.cpu_per_gpu")
    assert (finding.status, finding.message) == (Status.PASS, f"7.5 CPUs in the container's cpuset ({cpuset}) per GPU.")
    assert finding.message_values["cpuset"] == cpuset


def test_a_cpuset_of_forty_one_characters_is_cut_to_thirty_seven_and_dots():
    """'0,2,4,6,8,' (10) + '10,12,…,28' (10 numbers, 9 commas: 29) + ',3' (2) = 41 characters, 16 CPUs; 2 GPUs:
    8.0 per GPU. Cut: its first 37 characters are '0,2,4,6,8,' and the 9 groups '10,' … '26,' (27), then '...'."""
    cpuset = "0,2,4,6,8,10,12,14,16,18,20,22,24,26,28,3"
    assert len(cpuset) == 41
    shown = "0,2,4,6,8,10,12,14,16,18,20,22,24,26,..."
    facts = Facts(gpus=_gpus(2), host=HostFacts(cpu_count=64, cgroup_cpuset=cpuset, cgroup_cpuset_count=16))
    finding = _one(facts, "host.cpu_per_gpu")
    assert (finding.status, finding.message) == (Status.PASS, f"8.0 CPUs in the container's cpuset ({shown}) per GPU.")
    assert finding.observed == f"16 CPUs in the container's cpuset ({shown}) / 2 GPU(s) = 8.0"


# ------------------------------------------------------------------------------------------- NUMA affinity

def test_the_recorded_h200_shares_one_numa_node():
    """tests/fixtures/h200-collect: NVML gives GPU0's CPU affinity 0-15, nvidia-smi topo -m its NUMA affinity 0:
    one GPU, one node: no pinning needed; the observed value is the table, the reference `topo -m`."""
    finding = _recorded("h200-collect", "host.numa_affinity")
    assert finding.status == Status.PASS
    assert finding.message == "GPU affinity: GPU0: CPUs 0-15, NUMA 0. All GPUs share one NUMA node: no pinning needed."
    assert finding.observed == {"GPU0": {"cpus": "0-15", "numa_node": "0"}}
    assert finding.refs == ["nvidia-smi topo -m (CPU/NUMA Affinity)"]


def test_gpus_on_two_numa_nodes_are_told_to_pin():
    """A DGX H100's two Xeon 8480C (56 cores, 112 threads each): GPU0 on node 0 (CPUs 0-55,112-167), GPU1 on node 1
    (56-111,168-223), as NVML reports them (no topo -m): two nodes, so pin each rank to its node."""
    gpus = _gpus(2)
    gpus[0].numa_node, gpus[0].cpu_affinity = 0, "0-55,112-167"
    gpus[1].numa_node, gpus[1].cpu_affinity = 1, "56-111,168-223"
    finding = _one(Facts(gpus=gpus), "host.numa_affinity")
    assert finding.message == ("GPU affinity: GPU0: CPUs 0-55,112-167, NUMA 0; GPU1: CPUs 56-111,168-223, NUMA 1. "
                               "Pin each rank to its GPU's node (torchrun --numa-binding=node on torch >= 2.8, or "
                               "`numactl --cpunodebind=N --membind=N`).")
    assert finding.observed == {"GPU0": {"cpus": "0-55,112-167", "numa_node": "0"},
                                "GPU1": {"cpus": "56-111,168-223", "numa_node": "1"}}


def test_a_numa_node_without_cpus_is_shown_with_a_question_mark_and_no_note():
    """NVML gives GPU0's NUMA node 0 but no CPU list: the CPUs show as '?', and with no CPU list to compare, no note
    about sharing a node."""
    gpus = _gpus(1)
    gpus[0].numa_node = 0
    finding = _one(Facts(gpus=gpus), "host.numa_affinity")
    assert (finding.status, finding.message) == (Status.PASS, "GPU affinity: GPU0: CPUs ?, NUMA 0.")
    assert finding.observed == {"GPU0": {"cpus": "?", "numa_node": "0"}}


def test_cpus_without_a_numa_node_show_the_node_as_a_question_mark():
    """GPU0's CPUs 0-31 known, its node not: NUMA '?'."""
    finding = _one(Facts(gpus=_gpus(1, cpu_affinity="0-31")), "host.numa_affinity")
    assert finding.observed == {"GPU0": {"cpus": "0-31", "numa_node": "?"}}
    assert finding.message == "GPU affinity: GPU0: CPUs 0-31, NUMA ?. All GPUs share one NUMA node: no pinning needed."


@pytest.mark.parametrize("unknown", [None, "N/A"])
def test_an_unknown_node_is_not_a_second_node(unknown):
    """GPU0's node unknown (not reported, or topo -m's 'N/A'), GPU1 on node 0, both with CPUs 0-31: one known node
    and the same CPUs: one node, no pinning needed (an unknown node is no second node)."""
    gpus = _gpus(2, cpu_affinity="0-31")
    gpus[1].numa_node = 0
    topology = Topology(gpu_labels=["GPU0", "GPU1"], links={}, numa_affinity={0: unknown} if unknown else {})
    finding = _one(Facts(gpus=gpus, topology=topology), "host.numa_affinity")
    shown = unknown or "?"
    assert finding.message == (f"GPU affinity: GPU0: CPUs 0-31, NUMA {shown}; GPU1: CPUs 0-31, NUMA 0. All GPUs share "
                               "one NUMA node: no pinning needed.")


def test_cpu_lists_of_different_sizes_get_no_note():
    """One node reported for neither GPU, GPU0 with CPUs 0-15 (16), GPU1 with 0-7 (8): the lists differ, so no
    claim about sharing a node."""
    gpus = _gpus(2)
    gpus[0].cpu_affinity, gpus[1].cpu_affinity = "0-15", "0-7"
    finding = _one(Facts(gpus=gpus), "host.numa_affinity")
    assert finding.message == "GPU affinity: GPU0: CPUs 0-15, NUMA ?; GPU1: CPUs 0-7, NUMA ?."


# ------------------------------------------------------------------------------------------- /dev/shm

def _shm(shm_bytes: int, gpus: int):
    return _one(Facts(gpus=_gpus(gpus), host=HostFacts(shm_total_bytes=shm_bytes)), "host.shm")


SHM_SOURCE = thresholds("host_shm")["source"]


@pytest.mark.parametrize("gpus, expected", [(2, ">= 2 GiB"), (8, ">= 8 GiB")])
def test_dockers_default_shm_fails_with_two_or_more_gpus(gpus, expected):
    """Docker's default /dev/shm is 64 MiB (docker run --shm-size: 'If omitted, the system uses 64MB'):
    64 MiB < 512 MiB with 2+ GPUs: fail, expecting 1 GiB per GPU: 2 GiB for 2 GPUs, 8 GiB for 8."""
    finding = _shm(64 * MIB, gpus)
    assert finding.status == Status.FAIL
    assert finding.message == ("/dev/shm is 64 MiB: NCCL's shared-memory transport and DataLoader workers fail with "
                               "'Bus error' or 'unable to allocate shared memory'.")
    assert (finding.observed, finding.expected, finding.refs) == ("64 MiB", expected, [SHM_SOURCE])


def test_dockers_default_shm_with_one_gpu_only_warns():
    """One GPU: no NCCL peers, so 64 MiB is below 1 GiB per GPU (warn) but not a fail."""
    finding = _shm(64 * MIB, 1)
    assert finding.status == Status.WARN
    assert finding.message == ("/dev/shm is 64 MiB for 1 GPU(s), below 1 GiB per GPU: multi-worker data loading may "
                               "fail.")
    assert (finding.observed, finding.expected, finding.refs) == ("64 MiB", ">= 1 GiB", [SHM_SOURCE])


@pytest.mark.parametrize("shm_mib, shown", [(512, "512"), (1536, "1,536")])
def test_shm_from_512_mib_to_below_1_gib_per_gpu_warns(shm_mib, shown):
    """2 GPUs: 512 MiB is not below 512 MiB (no fail) but below 2 × 1 GiB (warn); 1,536 MiB = 1.5 GiB is still below
    2 GiB (1 GiB per GPU, not per machine)."""
    finding = _shm(shm_mib * MIB, 2)
    assert finding.status == Status.WARN
    assert finding.message == (f"/dev/shm is {shown} MiB for 2 GPU(s), below 1 GiB per GPU: multi-worker data loading "
                               "may fail.")
    assert (finding.observed, finding.expected, finding.refs) == (f"{shown} MiB", ">= 2 GiB", [SHM_SOURCE])


def test_one_gib_per_gpu_is_enough():
    """2 GPUs, /dev/shm exactly 2 GiB (2,048 MiB): not below 2 × 1 GiB: pass."""
    finding = _shm(2 * GIB, 2)
    assert (finding.status, finding.message, finding.observed) == (Status.PASS, "/dev/shm is 2.0 GiB.", "2,048 MiB")


def test_the_recorded_h200_shm_passes():
    """tests/fixtures/h200-collect: /dev/shm 137,438,953,472 B = 128 × 2^30: '128.0 GiB', 131,072 MiB."""
    finding = _recorded("h200-collect", "host.shm")
    assert (finding.status, finding.message, finding.observed) == (Status.PASS, "/dev/shm is 128.0 GiB.",
                                                                   "131,072 MiB")


# ------------------------------------------------------------------------------------------- free disk space

DISK_SOURCE = thresholds("host_disk")["source"]


def _disk(*disks: DiskUsage):
    return _one(Facts(gpus=_gpus(1), host=HostFacts(disks=list(disks))), "host.disk")


def test_the_recorded_h200_has_enough_disk_on_root():
    """tests/fixtures/h200-collect df: / has 68,700,696,576 B free of 270,553,174,016 (25 %): 68.7 → '69 GB';
    /dev/shm (tmpfs) and the sandbox's mount are not checkpoint disks."""
    finding = _recorded("h200-collect", "host.disk")
    assert (finding.status, finding.message) == (Status.PASS, "Enough free disk space (/: 69 GB free).")
    assert finding.refs == [DISK_SOURCE]


def test_pseudo_and_memory_filesystems_are_no_checkpoint_disks():
    """Only mounts no checkpoint goes to: kernel and device trees, /run, /boot, snaps, the sandbox's mount, and
    memory-backed or read-only filesystems. Each is half free (not low), so any one counted would be named."""
    half = {"size_bytes": 10**9, "available_bytes": 5 * 10**8}
    finding = _disk(DiskUsage(mount="/dev/shm", filesystem="shm", **half),
                    DiskUsage(mount="/proc/fs/nfsd", filesystem="nfsd", **half),
                    DiskUsage(mount="/sys/firmware/efi/efivars", filesystem="efivarfs", **half),
                    DiskUsage(mount="/dev/hugepages", filesystem="hugetlbfs", **half),
                    DiskUsage(mount="/run/media/usb", filesystem="/dev/sdb1", **half),
                    DiskUsage(mount="/boot/efi", filesystem="/dev/nvme0n1p1", **half),
                    DiskUsage(mount="/snap/core22/1748", filesystem="/dev/loop3", **half),
                    DiskUsage(mount="/mnt/sandboxing/model_tools_env/v1/python", filesystem="model_tools_unavailable",
                              **half),
                    DiskUsage(mount="/tmp", filesystem="tmpfs", **half),
                    DiskUsage(mount="/scratch", filesystem="devtmpfs", **half),
                    DiskUsage(mount="/opt", filesystem="overlay_ro", **half))
    assert (finding.status, finding.message) == (Status.PASS, "Enough free disk space.")


def test_a_mount_of_size_zero_is_skipped():
    """An automount point (autofs, df shows size 0) listed first, then /data with 1.2 TB free of 2 TB: the free
    space named is /data's, 1,200 GB."""
    finding = _disk(DiskUsage(mount="/net", size_bytes=0, available_bytes=0, filesystem="-hosts"),
                    DiskUsage(mount="/data", size_bytes=2 * 10**12, available_bytes=12 * 10**11, filesystem="/dev/md0"))
    assert finding.message == "Enough free disk space (/data: 1,200 GB free)."


def test_root_is_named_even_when_it_is_not_listed_first():
    """/home (600 GB free of 1 TB) listed before / (200 GB free of 500 GB): the pass names /, 200 GB."""
    finding = _disk(DiskUsage(mount="/home", size_bytes=10**12, available_bytes=6 * 10**11, filesystem="/dev/sdb1"),
                    DiskUsage(mount="/", size_bytes=5 * 10**11, available_bytes=2 * 10**11, filesystem="/dev/sda2"))
    assert (finding.status, finding.message) == (Status.PASS, "Enough free disk space (/: 200 GB free).")


@pytest.mark.parametrize("size_gb, free_gb", [
    (1000, 50),   # 50 GB is not below 50 GB (5 %)
    (100, 10),    # 10 % is not below 10 % (10 GB < 50 GB)
    (200, 40),    # 40 GB < 50 GB, but 20 % free
    (1000, 60),   # 6 % free, but 60 GB
])
def test_a_disk_is_low_only_below_both_50_gb_and_ten_percent(size_gb, free_gb):
    """Low means both below 50 GB and below 10 % of the disk; each case misses one (or sits on a bound)."""
    finding = _disk(DiskUsage(mount="/", size_bytes=size_gb * 10**9, available_bytes=free_gb * 10**9,
                              filesystem="/dev/sda2"))
    assert (finding.status, finding.message) == (Status.PASS, f"Enough free disk space (/: {free_gb} GB free).")


def test_one_low_disk_is_named_with_its_free_and_total_space():
    """/ with 12 GB free of 500 GB (2.4 %: below 10 % and below 50 GB) beside a healthy /data (1.2 TB free of 2 TB):
    warn naming / alone; expected '>= 50 GB or 10% free'."""
    finding = _disk(DiskUsage(mount="/data", size_bytes=2 * 10**12, available_bytes=12 * 10**11, filesystem="/dev/md0"),
                    DiskUsage(mount="/", size_bytes=5 * 10**11, available_bytes=12 * 10**9, filesystem="/dev/sda2"))
    assert finding.status == Status.WARN
    assert finding.message == "Little free space: / 12 GB free of 500 GB; checkpoints will fail to save."
    assert (finding.message_id, finding.message_values) == ("host.disk.low_one",
                                                            {"mount": "/", "free_gb": 12.0, "size_gb": 500.0})
    assert (finding.observed, finding.expected) == ("/ 12 GB free of 500 GB", ">= 50 GB or 10% free")
    assert finding.refs == [DISK_SOURCE]


def test_several_low_disks_are_listed_in_order():
    """/ (12 GB free of 500 GB, 2.4 %) and /scratch (3 GB free of 2 TB, 0.15 %) both low: one warning listing both,
    in df's order, joined by ', '."""
    finding = _disk(DiskUsage(mount="/", size_bytes=5 * 10**11, available_bytes=12 * 10**9, filesystem="/dev/sda2"),
                    DiskUsage(mount="/scratch", size_bytes=2 * 10**12, available_bytes=3 * 10**9, filesystem="/dev/md0"))
    described = "/ 12 GB free of 500 GB, /scratch 3 GB free of 2,000 GB"
    assert finding.status == Status.WARN
    assert finding.message == f"Little free space: {described}; checkpoints will fail to save."
    assert (finding.message_id, finding.observed) == ("host.disk.low", described)


# ------------------------------------------------------------------------------------------- locked memory

def test_unlimited_locked_memory_passes_even_without_gpus():
    """ulimit -l 'unlimited' (-1) is judged on a machine without GPUs too (it is about RDMA, not the GPUs)."""
    finding = _one(Facts(gpus=[], host=HostFacts(memlock_limit_bytes=-1)), "host.memlock")
    assert (finding.status, finding.message) == (Status.PASS, "Locked memory (ulimit -l) is unlimited.")


def test_unlimited_locked_memory_passes_with_rdma():
    facts = Facts(gpus=_gpus(8), host=HostFacts(memlock_limit_bytes=-1),
                  ib_ports=[IbPort(device="mlx5_0", port=1, state="ACTIVE", rate_gbit_per_s=400.0)])
    finding = _one(facts, "host.memlock")
    assert (finding.status, finding.message) == (Status.PASS, "Locked memory (ulimit -l) is unlimited.")


def test_limited_locked_memory_without_rdma_is_only_noted():
    """Linux >= 5.16's default RLIMIT_MEMLOCK is 8 MiB (commit 9dcc38e2813e, 'mm: increase default MLOCK_LIMIT to
    8 MiB'): 8,388,608 B / 1,024 = 8,192 KiB; no RDMA device: pass with a note."""
    finding = _one(Facts(gpus=_gpus(1), host=HostFacts(memlock_limit_bytes=8 * MIB)), "host.memlock")
    assert finding.status == Status.PASS
    assert finding.message == ("Locked memory is limited to 8,192 KiB; no RDMA device here, so this only matters once "
                               "InfiniBand/RoCE is used.")
    assert finding.observed == "8192 KiB"


def test_limited_locked_memory_with_rdma_warns():
    """The kernel's default before 5.16 (MLOCK_LIMIT): 64 KiB (65,536 B / 1,024 = 64). With an InfiniBand port
    (mlx5_0, 400 Gb/s): warn, expecting unlimited, citing NCCL's troubleshooting page."""
    facts = Facts(gpus=_gpus(8), host=HostFacts(memlock_limit_bytes=64 * 1024),
                  ib_ports=[IbPort(device="mlx5_0", port=1, state="ACTIVE", rate_gbit_per_s=400.0)])
    finding = _one(facts, "host.memlock")
    assert finding.status == Status.WARN
    assert finding.message == ("Locked memory is limited to 64 KiB: RDMA (InfiniBand/RoCE) registration and large "
                               "pinned buffers fail.")
    assert (finding.observed, finding.expected) == ("64 KiB", "unlimited")
    assert finding.refs == [f"NCCL troubleshooting (Docker, memlock): {NCCL_TROUBLESHOOTING}"]


def test_gpus_on_two_sockets_with_no_numa_node_reported_are_told_to_pin():
    """A DGX H100-like layout (2 × 56 cores, SMT): GPU0's CPUs 0-55,112-167 and GPU1's 56-111,168-223, NUMA node not
    reported. The lists are the same size but share no CPU: the GPUs sit on two sockets, so each rank is pinned, not
    told that all GPUs share one node."""
    facts = Facts(gpus=[GpuFacts(index=0, bus_id="0000:18:00.0", cpu_affinity="0-55,112-167"),
                        GpuFacts(index=1, bus_id="0000:9a:00.0", cpu_affinity="56-111,168-223")])
    finding = _one(facts, "host.numa_affinity")
    assert finding.message_id == "host.numa_affinity.pass_nodes"
    assert finding.message.startswith("GPU affinity: GPU0: CPUs 0-55,112-167, NUMA ?; GPU1: CPUs 56-111,168-223, "
                                      "NUMA ?. Pin each rank to its GPU's node")


def test_two_named_numa_nodes_are_told_to_pin_without_cpu_lists():
    """nvml.json gives GPU0 NUMA node 0 and GPU1 node 1 but no CPU lists: two named nodes are enough to pin."""
    gpus = _gpus(2)
    gpus[0].numa_node, gpus[1].numa_node = 0, 1
    finding = _one(Facts(gpus=gpus), "host.numa_affinity")
    assert finding.message == ("GPU affinity: GPU0: CPUs ?, NUMA 0; GPU1: CPUs ?, NUMA 1. Pin each rank to its GPU's "
                               "node (torchrun --numa-binding=node on torch >= 2.8, or `numactl --cpunodebind=N "
                               "--membind=N`).")


def test_gpus_sharing_a_socket_in_pairs_are_still_on_two_sockets():
    """A DGX H100 puts 4 GPUs on each of its two sockets: here GPU0, GPU1 report CPUs 0-55,112-167 and GPU2, GPU3
    56-111,168-223, no NUMA node. Two different lists that share no CPU: two sockets, pin."""
    gpus = _gpus(4)
    for gpu, cpus in zip(gpus, ["0-55,112-167", "0-55,112-167", "56-111,168-223", "56-111,168-223"]):
        gpu.cpu_affinity = cpus
    finding = _one(Facts(gpus=gpus), "host.numa_affinity")
    assert finding.message_id == "host.numa_affinity.pass_nodes"


def test_overlapping_cpu_lists_are_no_proof_of_two_sockets():
    """GPU0 0-31 and GPU1 16-47: different lists, but CPUs 16-31 are in both, so neither two sockets nor one node
    is claimed."""
    gpus = _gpus(2)
    gpus[0].cpu_affinity, gpus[1].cpu_affinity = "0-31", "16-47"
    finding = _one(Facts(gpus=gpus), "host.numa_affinity")
    assert finding.message == "GPU affinity: GPU0: CPUs 0-31, NUMA ?; GPU1: CPUs 16-47, NUMA ?."

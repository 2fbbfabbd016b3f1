"""network.hca_placement (issue 33): a GPU whose nearest RDMA rail is across the CPU interconnect.

The matrices are published `nvidia-smi topo -m` captures (tests/fixtures/public/hca-placement/README.md names each);
the machine classes that no capture shows (NICs on one socket only, a pod's rows) are cut out of them, column by column
or row by row, as the tests say. The rails are sysfs captures in the kernel's file layout
(Documentation/ABI/stable/sysfs-class-infiniband; `<dev>/device/numa_node` is the PCI device's node, -1 where the
platform does not say)."""

from __future__ import annotations

import re

from conftest import PUBLIC
from gpuready.checks.hca_placement import hca_placement  # noqa: F401 (registers the check)
from gpuready.checks.registry import run_checks
from gpuready.facts.host_files import split_sections
from gpuready.facts.network_files import parse_ib_sysfs
from gpuready.facts.topology import nic_legend, parse_topo_matrix
from gpuready.facts.types import Facts, GpuFacts
from gpuready.model import Status

HCA = PUBLIC / "hca-placement"
# sglang check_env report, 8 GPUs on NVSwitch (NV18), one ConnectX per GPU at PIX, NUMA 0 and 1.
H100_PIX = (HCA / "topo-h100-8nic-pix.txt").read_text()
# An 8×A100 AMD EPYC box (four NUMA nodes with GPUs): two NICs per GPU pair at PXB, mlx5_8/9 at SYS from every GPU.
A100_EPYC = (HCA / "topo-a100-epyc-10nic.txt").read_text()
ID = "network.hca_placement"


def _sysfs(devices: dict[str, str | None], state: str = "4: ACTIVE", model: str = "MT4129") -> str:
    """A `collect` sysfs.txt for the named HCAs (device → numa_node file's text, None: no such file)."""
    parts = []
    for device, numa in devices.items():
        parts += [f"==> /sys/class/infiniband/{device}/hca_type <==\n{model}\n",
                  f"==> /sys/class/infiniband/{device}/ports/1/state <==\n{state}\n",
                  f"==> /sys/class/infiniband/{device}/ports/1/rate <==\n400 Gb/sec (4X NDR)\n"]
        if numa is not None:
            parts.append(f"==> /sys/class/infiniband/{device}/device/numa_node <==\n{numa}\n")
    return "\n".join(parts)


def _facts(topo: str | None, sysfs: str, gpus: int = 8, numa: dict[int, int] | None = None) -> Facts:
    return Facts(gpus=[GpuFacts(index=i, bus_id=f"0000:{0x10 + i:02x}:00.0", numa_node=(numa or {}).get(i))
                       for i in range(gpus)],
                 topology=parse_topo_matrix(topo) if topo else None,
                 ib_ports=parse_ib_sysfs(split_sections(sysfs)))


def _judge(facts: Facts):
    return run_checks(facts, only=[ID])


def _cut_columns(text: str, keep_nics: set[str]) -> str:
    """The matrix with only the named NIC columns (and rows) kept: a machine that has only those NICs."""
    lines = text.splitlines()
    header = lines[0].split()
    drop = {i for i, label in enumerate(header) if label.startswith("NIC") and label not in keep_nics}
    out = ["\t" + "\t".join(label for i, label in enumerate(header) if i not in drop)]
    for line in lines[1:]:
        cells = line.split()
        label = cells[0].rstrip(":") if cells else ""
        if re.fullmatch(r"NIC\d+", label) and label not in keep_nics:
            continue  # the NIC's own row, or its line in the NIC Legend
        out.append("\t".join([cells[0]] + [c for i, c in enumerate(cells[1:]) if i not in drop])
                   if label.startswith("GPU") else line)
    return "\n".join(out) + "\n"


def test_the_nic_legend_names_each_column():
    assert nic_legend(A100_EPYC) == {f"NIC{i}": f"mlx5_{i}" for i in range(10)}
    assert parse_topo_matrix(H100_PIX).nic_names["NIC7"] == "mlx5_7"
    assert nic_legend("GPU0 X\n") == {}


def test_an_hgx_board_with_a_rail_per_gpu_has_no_finding():
    findings = _judge(_facts(H100_PIX, _sysfs({f"mlx5_{i}": None for i in range(8)})))
    assert [f.status for f in findings] == [Status.PASS]
    assert "GPU4 → mlx5_4 PIX" in findings[0].message and "GPU0 → mlx5_0 PIX" in findings[0].message


def test_far_nics_do_not_matter_where_a_near_one_exists():
    # The EPYC box: mlx5_8/9 are SYS from every GPU, but each GPU has two rails at PXB.
    findings = _judge(_facts(A100_EPYC, _sysfs({f"mlx5_{i}": None for i in range(10)})))
    assert [f.status for f in findings] == [Status.PASS]
    assert "GPU7 → mlx5_6 PXB" in findings[0].message


def test_two_nics_on_socket_0_warn_for_each_socket_1_gpu():
    # The H100 board cut to its NIC0 and NIC1 (both on NUMA node 0): GPUs 4-7 (NUMA 1) reach them only at SYS.
    topo = _cut_columns(H100_PIX, {"NIC0", "NIC1"})
    assert set(parse_topo_matrix(topo).nics) == {"NIC0", "NIC1"}
    findings = _judge(_facts(topo, _sysfs({"mlx5_0": "0", "mlx5_1": "0"})))
    assert [(f.status, f.subject.gpu.index, f.subject.nic) for f in findings] == [
        (Status.WARN, 4, "mlx5_0"), (Status.WARN, 5, "mlx5_0"), (Status.WARN, 6, "mlx5_0"), (Status.WARN, 7, "mlx5_0")]
    assert findings[0].message.startswith("GPU4's nearest RDMA rail is mlx5_0, at SYS")
    assert any("NCCL_NET_GDR_LEVEL" in ref for ref in findings[0].refs)


def test_only_the_rails_count_not_every_nic_column():
    # The same cut board where only mlx5_0/1 are rails but the matrix still lists NIC4 (a card with no port up).
    topo = _cut_columns(H100_PIX, {"NIC0", "NIC1", "NIC4"})
    sysfs = _sysfs({"mlx5_0": "0", "mlx5_1": "0"}) + "\n" + _sysfs({"mlx5_4": "1"}, state="1: DOWN", model="MT4125")
    findings = _judge(_facts(topo, sysfs))
    assert [f.subject.gpu.index for f in findings if f.status == Status.WARN] == [4, 5, 6, 7]


def _pod(board: str, gpus: list[int]) -> str:
    """What `topo -m` shows inside a pod given these GPUs of the board: their rows and columns only, numbered from 0,
    with every NIC column and the legends."""
    lines = board.splitlines()
    header = lines[0].split()
    keep = [header.index(f"GPU{gpu}") for gpu in gpus] + [i for i, label in enumerate(header) if label.startswith("NIC")]
    out = ["\t" + "\t".join([f"GPU{n}" for n in range(len(gpus))] + [header[i] for i in keep[len(gpus):]]
                            + ["CPU Affinity", "NUMA Affinity"])]
    for number, gpu in enumerate(gpus):
        cells = next(line.split() for line in lines if line.startswith(f"GPU{gpu}"))
        out.append("\t".join([f"GPU{number}"] + [cells[1 + i] for i in keep] + cells[1 + len(header) - 7:][:2]))
    return "\n".join(out + [line for line in lines if not line.startswith(("GPU", "NIC", "\t"))
                             or line.strip().startswith("NIC") and ":" in line]) + "\n"


def test_a_pod_is_judged_on_its_own_gpus_rows():
    # A pod given GPUs 4 and 5 of the board cut to NIC0/NIC1: its topo -m shows two rows (numbered 0 and 1), both SYS.
    board = _cut_columns(H100_PIX, {"NIC0", "NIC1"})
    pod_far = _pod(board, [4, 5])
    assert parse_topo_matrix(pod_far).nics == {"NIC0": {0: "SYS", 1: "SYS"}, "NIC1": {0: "SYS", 1: "SYS"}}
    findings = _judge(_facts(pod_far, _sysfs({"mlx5_0": None, "mlx5_1": None}), gpus=2))
    assert [(f.status, f.subject.gpu.index, f.subject.nic) for f in findings] == [(Status.WARN, 0, "mlx5_0"),
                                                                                 (Status.WARN, 1, "mlx5_0")]
    findings = _judge(_facts(_pod(board, [0, 1]), _sysfs({"mlx5_0": None, "mlx5_1": None}), gpus=2))
    assert [f.status for f in findings] == [Status.PASS]
    assert "GPU0 → mlx5_0 PIX, GPU1 → mlx5_1 PIX" in findings[0].message


def test_one_nic_is_nothing_to_choose_between():
    topo = _cut_columns(H100_PIX, {"NIC0"})
    findings = _judge(_facts(topo, _sysfs({"mlx5_0": "0"})))
    assert [f.status for f in findings] == [Status.SKIP]
    assert "Fewer than two RDMA rails (1 HCA" in findings[0].message


def test_no_topology_and_no_numa_nodes_skip_with_the_reason():
    findings = _judge(_facts(None, _sysfs({"mlx5_0": None, "mlx5_1": None})))
    assert [f.status for f in findings] == [Status.SKIP]
    assert "nvidia-smi-topo.txt" in findings[0].message


def test_numa_nodes_alone_find_the_gpu_without_a_rail_on_its_node():
    # No topo -m: the HCAs' sysfs numa_node says both rails are on node 0; the GPUs (nvidia-smi -q / NVML) are on 0 and 1.
    facts = _facts(None, _sysfs({"mlx5_0": "0", "mlx5_1": "0"}), gpus=4, numa={0: 0, 1: 0, 2: 1, 3: 1})
    assert {port.device: port.numa_node for port in facts.ib_ports} == {"mlx5_0": 0, "mlx5_1": 0}
    findings = _judge(facts)
    assert [(f.status, f.subject.gpu.index) for f in findings] == [(Status.WARN, 2), (Status.WARN, 3)]
    assert "GPU2 is on NUMA node 1, where no RDMA rail sits (the rails are on NUMA node 0" in findings[0].message
    both = _facts(None, _sysfs({"mlx5_0": "0", "mlx5_1": "1"}), gpus=4, numa={0: 0, 1: 0, 2: 1, 3: 1})
    assert [f.status for f in _judge(both)] == [Status.PASS]


def test_a_numa_node_of_minus_one_says_nothing():
    facts = _facts(None, _sysfs({"mlx5_0": "-1", "mlx5_1": "-1"}), gpus=2, numa={0: 0, 1: 1})
    assert [port.numa_node for port in facts.ib_ports] == [None, None]
    assert [f.status for f in _judge(facts)] == [Status.SKIP]

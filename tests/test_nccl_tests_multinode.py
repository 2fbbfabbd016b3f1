"""nccl-tests runs whose ranks span several nodes, judged against the RDMA NICs of the nodes (nccl_tests.busbw_low,
estimate/expect.py `internode_busbw_floor_gb_per_s`, knowledge/nics.toml).

Evidence, none of it from the real cases that showed the gap:
- NVIDIA/nccl-tests#319 (2 Supermicro HGX hosts, 8x H100 and "8x CX-7 IB 400Gbps" each, 16 ranks): busbw ~44 GB/s
  at 16 GiB where MLNX_OFED gave 450 (the rows below are the thread's, the rank lines are nccl-tests' own format
  `#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s` with the hosts of its `mpirun -H lccn09:8,lccn19:8`).
- NVIDIA/nccl-tests#100 (2 HGX A100 nodes with four ConnectX-6 IB at 200 Gb/s, 16 ranks): 91 GB/s busbw, which the
  thread accepts (4 × 24 GB/s per 200G NIC, sjeaugey in nccl-tests#119); its rows are rebuilt from that figure.
- The lspci lines are pciutils' shapes (`BB:DD.F class: name` and ls-tree.c's `-DD.F  name`) with pci.ids' names for
  vendor 15b3 (`MT2910 Family [ConnectX-7]`, `MT28908 Family [ConnectX-6]`).
"""

from __future__ import annotations

from gpuready.estimate.expect import internode_busbw_floor_gb_per_s, node_nics
from gpuready.facts.log_facts import LogFacts
from gpuready.facts.log_lines import Line, feed_text
from gpuready.facts.nccl_log_reader import NcclLogReader
from gpuready.facts.nccl_tests_reader import NcclTestsReader
from gpuready.facts.nic_lines import parse_nic_line
from gpuready.facts.nic_reader import NicLinesReader
from gpuready.facts.types import Facts, IbPort
from helpers import judged


def rank_lines(hosts: list[str], per_host: int, model: str) -> str:
    """`# Using devices` as nccl-tests prints it (src/common.cu), one line per rank."""
    lines, rank = [], 0
    for host in hosts:
        for device in range(per_host):
            lines.append(f"#  Rank {rank:2d} Group  0 Pid {4000 + rank:6d} on {host:>10s} device {device:2d} "
                         f"[0x{0x18 + 16 * device:02x}] {model}")
            rank += 1
    return "\n".join(lines)


HEADER = "# nThread 1 nGpus 1 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n"
COLUMNS = """#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""

# NVIDIA/nccl-tests#319: 2 hosts × 8 H100, 8× ConnectX-7 IB 400G per host, DOCA host stack
SLOW_CX7 = HEADER + rank_lines(["lccn09", "lccn19"], 8, "NVIDIA H100 80GB HBM3") + "\n" + COLUMNS + """\
  1073741824     268435456     float     sum      -1    45390   23.66   44.36      0    45333   23.69   44.41      0
  2147483648     536870912     float     sum      -1    90808   23.65   44.34      0    90719   23.67   44.38      0
  4294967296    1073741824     float     sum      -1   181855   23.62   44.28      0   181450   23.67   44.38      0
  8589934592    2147483648     float     sum      -1   364906   23.54   44.14      0   363363   23.64   44.33      0
 17179869184    4294967296     float     sum      -1   727698   23.61   44.27      0   729105   23.56   44.18      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 20.017
"""

LSPCI_8X_CX7 = "\n".join(f"{bus:02x}:00.0 Infiniband controller: Mellanox Technologies MT2910 Family [ConnectX-7]"
                         for bus in (0x1a, 0x40, 0x53, 0x66, 0x9c, 0xc0, 0xd2, 0xe4))

# NVIDIA/nccl-tests#100: 2 HGX A100 nodes, four ConnectX-6 HDR 200G per node, ~91 GB/s busbw
HEALTHY_CX6 = HEADER + rank_lines(["ubuntu-116", "ubuntu-148"], 8, "NVIDIA A100-SXM-80GB") + "\n" + COLUMNS + """\
  4294967296    1073741824     float     sum      -1    88465   48.55   91.03      0    88431   48.57   91.07      0
  8589934592    2147483648     float     sum      -1   176929   48.55   91.03      0   176900   48.56   91.05      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 91.04
"""

LSPCI_TREE_4X_CX6 = """\
-+-[0000:c0]-+-00.0  Advanced Micro Devices, Inc. [AMD] Starship/Matisse Root Complex
 |           +-01.1-[c1-c4]----00.0-[c2-c4]--+-00.0-[c3]----00.0  Mellanox Technologies MT28908 Family [ConnectX-6]
 |           |                               \\-10.0-[c4]----00.0  NVIDIA Corporation GA100 [A100 SXM4 80GB]
 +-[0000:80]-+-01.1-[81-84]----00.0-[82-84]--+-00.0-[83]----00.0  Mellanox Technologies MT28908 Family [ConnectX-6]
 +-[0000:40]-+-01.1-[41-44]----00.0-[42-44]--+-00.0-[43]----00.0  Mellanox Technologies MT28908 Family [ConnectX-6]
 \\-[0000:00]-+-01.1-[01-04]----00.0-[02-04]--+-00.0-[03]----00.0  Mellanox Technologies MT28908 Family [ConnectX-6]
"""


def run(*inputs: tuple[str, str], facts: Facts | None = None):
    readers = [NcclTestsReader(), NicLinesReader(), NcclLogReader()]
    for source, text in inputs:
        for reader in readers:
            feed_text(reader, source, text)
    found = judged(*readers, host="inputs", facts=facts)
    return [finding for finding in found if finding.check_id == "nccl_tests.busbw_low"]


def test_two_nodes_of_eight_cx7_at_44_gb_per_s_warn_below_the_floor():
    [finding] = run(("nccl.txt", SLOW_CX7), ("lspci.txt", LSPCI_8X_CX7))
    assert finding.status.value == "warn"  # the ports' rate is not shown: a warning, not a failure
    assert finding.expected == 96.0  # 8 × 400 Gb/s / 8 × 0.96 = 384 GB/s, a quarter of it
    assert "2 nodes × 8 ranks" in finding.message and "8 of the 8 ConnectX-7" in finding.message
    assert "44.4 GB/s at 1,024 MiB" in finding.message or "44.4" in finding.message
    assert finding.fix and "NET/IB" in finding.fix
    assert any("nccl-tests#290" in ref for ref in finding.refs)


def test_two_nodes_of_four_cx6_at_91_gb_per_s_pass_in_a_tree_listing():
    [finding] = run(("nccl.txt", HEALTHY_CX6), ("lspci-tv.txt", LSPCI_TREE_4X_CX6))
    assert finding.status.value == "pass"
    assert "4 of the 4 ConnectX-6" in finding.message


def test_known_link_rate_fails_below_half_of_the_active_ports():
    ports = [IbPort(device=f"mlx5_{n}", port=1, state="ACTIVE", rate_gbit_per_s=400.0) for n in range(8)]
    [finding] = run(("nccl.txt", SLOW_CX7), facts=Facts(ib_ports=ports))
    assert finding.status.value == "fail" and finding.expected == 192.0  # half of 8 × 48 GB/s


def test_no_nic_facts_efa_or_sockets_give_no_expectation():
    [finding] = run(("nccl.txt", SLOW_CX7))
    assert finding.status.value == "skip" and "no RDMA NIC" in finding.message
    efa = "00:06.0 Ethernet controller: Amazon.com, Inc. Elastic Fabric Adapter (EFA)"
    assert run(("nccl.txt", SLOW_CX7), ("lspci.txt", efa))[0].status.value == "skip"
    # NCCL's own channel line over sockets (transport/net.cc `Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d`)
    socket = "lccn09:1:1 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/Socket/0"
    [finding] = run(("nccl.txt", SLOW_CX7), ("lspci.txt", LSPCI_8X_CX7), ("nccl.log", socket))
    assert finding.status.value == "skip" and "NET/Socket" in finding.message


def test_a_run_at_scale_with_small_sizes_per_rank_is_not_judged():
    hosts = [f"node{n:03d}" for n in range(128)]
    text = HEADER + rank_lines(hosts, 8, "NVIDIA H100 80GB HBM3") + "\n" + COLUMNS + """\
  8589934592    2147483648     float     sum      -1   364906   23.54   47.06      0   363363   23.64   47.25      0
"""
    [finding] = run(("nccl.txt", text), ("lspci.txt", LSPCI_8X_CX7))
    assert finding.status.value == "skip" and "MiB per rank" in finding.message


def test_lspci_shapes_count_cards_not_ports_or_subsystems():
    def parse(text):
        return parse_nic_line(Line(source="x", number=1, text=text))
    flat = parse("0000:17:00.1 Infiniband controller [0207]: Mellanox Technologies MT2910 Family [ConnectX-7] [15b3:1021]")
    assert flat.name == "Mellanox Technologies MT2910 Family [ConnectX-7]" and flat.function == 1
    tree = parse(" |           +-02.4-[0d]----00.0  Mellanox Technologies MT2910 Family [ConnectX-7]")
    assert tree.function == 0 and tree.address is None
    vf = parse("0002:00:02.0 Infiniband controller: Mellanox Technologies MT28908 Family [ConnectX-6 Virtual Function]")
    assert vf.virtual
    assert parse("\tSubsystem: Mellanox Technologies ConnectX-7 HHHL adapter card") is None
    dual = "\n".join(f"17:00.{fn} Ethernet controller: Mellanox Technologies MT2910 Family [ConnectX-7]" for fn in (0, 1))
    reader = feed_text(NicLinesReader(), "lspci.txt", dual)
    nics = node_nics(Facts(logs=LogFacts(nics=reader.facts())))
    assert nics.count == 1 and nics.model == "ConnectX-7"  # one dual-port card


def test_alltoall_is_bounded_by_one_nic():
    reader = feed_text(NicLinesReader(), "lspci.txt", LSPCI_8X_CX7)
    facts = Facts(logs=LogFacts(nics=reader.facts()))
    assert internode_busbw_floor_gb_per_s(facts, 2, 8, "all_to_all").ceiling_gb_per_s == 48.0
    assert internode_busbw_floor_gb_per_s(facts, 2, 4, "all_reduce").ceiling_gb_per_s == 192.0  # one NIC per GPU

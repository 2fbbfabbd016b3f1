"""The transport NCCL really used, per communicator (issue 33): NET/IB, RoCE, NET/Socket, a plugin; GPUDirect RDMA on
or off; a multi-node communicator on sockets where the logs or the machine show RDMA NICs fails with NCCL's reason.

Lines marked "published" are quoted as printed in the named GitHub thread; the others are rebuilt from NCCL's format
strings (src/init.cc `ncclCommInitRank comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init
START|COMPLETE`, src/transport.cc `Channel %02d/%d : %d[%d] -> %d[%d] [send|receive] via %s`, src/misc/param.cc `%s set
by environment to %s.`, src/transport/net_ib.cc `NET/IB : GPU Direct RDMA Disabled for HCA %d '%s' (no module)`,
src/graph/paths.cc `GPU Direct RDMA Disabled for GPU %d / HCA %lx (distance %d > %d)`).
"""

from gpuready.facts import nccl_log as parse
from gpuready.facts.log_lines import feed_text
from gpuready.facts.nccl_log_reader import NcclLogReader
from gpuready.facts.types import Facts, IbPort
from helpers import judged, of

# NVIDIA/nccl#1357 (2 nodes x 8 H100, 4 IB NICs with SHARP), published.
INIT_1357 = ("qh100-gpu19:49360:49416 [6] NCCL INFO ncclCommInitRank comm 0x55d900e4a6c0 rank 6 nranks 16 cudaDev 6 "
             "nvmlDev 6 busId ba000 commId 0xd8289d3e6e217d26 - Init START")
IB_1357 = ("qh100-gpu20:39636:39690 [7] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB/SHARP [1]mlx5_1:1/IB/SHARP "
           "[2]mlx5_4:1/IB/SHARP [3]mlx5_5:1/IB/SHARP [RO]; OOB ibp25s0:10.20.0.120<0>")
# NVIDIA/nccl-tests#185 (2 x DGX H100 on RoCE), published.
ROCE_185 = ("dgxh100-4:460770:460842 [0] NCCL INFO NET/IB : Using [0]mlx5_10:1/RoCE [1]mlx5_11:1/RoCE [RO]; "
            "OOB enp220s0np0:11.1.128.136<0>")
# NVIDIA/nccl#676 (2 x DGX-A100 forced onto sockets with NCCL_NET=Socket), published.
SOCKET_676 = ("gpu01:124172:124172 [0] NCCL INFO NET/Socket : Using [0]enp225s0f1:10.10.10.2<0>\n"
              "gpu01:124172:124172 [0] NCCL INFO Using network Socket\n")
# NVIDIA/nccl#952 (multi-node job, `NET/IB : No device found`, channels over sockets), published.
NO_DEVICE_952 = ("<cluster_name>:919:1150 [0] NCCL INFO NET/IB : No device found.\n"
                 "<cluster_name>:920:1145 [1] NCCL INFO Channel 04/0 : 9[1] -> 10[2] via P2P/IPC/read\n"
                 "<cluster_name>:919:1150 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [receive] via NET/Socket/0\n"
                 "<cluster_name>:919:1150 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [send] via NET/Socket/0\n")
# NVIDIA/nccl#1053 (one host, NCCL_IB_DISABLE=1, sockets over lo), published.
SOCKET_GDR_1053 = "axa:3048391:3048566 [0] NCCL INFO NET/Socket : GPU Direct RDMA Disabled for HCA 0 'lo'"

ACTIVE_IB = Facts(ib_ports=[IbPort(device="mlx5_0", port=1, state="ACTIVE", rate_gbit_per_s=200.0,
                                   link_layer="InfiniBand")])


def run(text, facts=None):
    reader = feed_text(NcclLogReader(), "nccl.log", text)
    return reader.facts(), judged(reader, host="ctx", facts=facts)


def transport(found):
    [finding] = of(found, "nccl.transport")
    return finding


# ------------------------------------------------------------------------------------------------ parsing

def test_commid_and_gdr_lines_parse_as_nccl_prints_them():
    init = parse.parse_line(INIT_1357)
    assert (init.comm_id, init.rank, init.nranks, init.complete) == ("0xd8289d3e6e217d26", 6, 16, False)
    no_module = parse.parse_line("n1:7:9 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)")
    assert (no_module.enabled, no_module.hca, no_module.why) == (False, "0 'mlx5_0'", "no module")
    distance = parse.parse_line("n1:7:9 [0] NCCL INFO GPU Direct RDMA Disabled for GPU 0 / HCA 0 (distance 8 > 5)")
    assert (distance.enabled, distance.why) == (False, "distance 8 > 5")
    enabled = parse.parse_line("n1:7:9 [0] NCCL INFO GPU Direct RDMA Enabled for GPU 1b000 / HCA 0 "
                               "(distance 4 <= 5), read 1")
    assert enabled.enabled is True


def test_roce_and_ib_link_layers_are_kept_published():
    facts, _found = run(ROCE_185 + "\n")
    assert list(facts.link_layers) == ["RoCE"]
    facts, _found = run(IB_1357 + "\n")
    assert list(facts.link_layers) == ["IB"]  # `/IB/SHARP`: InfiniBand with SHARP


def test_socket_gdr_line_is_not_a_gdr_finding_published():
    facts, found = run(SOCKET_GDR_1053 + "\n")
    assert facts.gdr_off == {} and found == []


# ------------------------------------------------------------------------------------------------ per communicator

def _ib_job(via_suffix):
    """Two nodes, one communicator (NVIDIA/nccl#1357's Init line and its peer rank 14 on the other node)."""
    return "\n".join([
        INIT_1357, IB_1357,
        "qh100-gpu20:39636:39690 [6] NCCL INFO ncclCommInitRank comm 0x55aa rank 14 nranks 16 cudaDev 6 nvmlDev 6 "
        "busId ba000 commId 0xd8289d3e6e217d26 - Init START",
        f"qh100-gpu19:49360:49416 [6] NCCL INFO Channel 00/0 : 6[6] -> 14[6] [send] via NET/IB/0{via_suffix}",
        f"qh100-gpu20:39636:39690 [6] NCCL INFO Channel 00/0 : 6[6] -> 14[6] [receive] via NET/IB/0{via_suffix}",
        "qh100-gpu19:49360:49416 [6] NCCL INFO Channel 00/0 : 6[6] -> 7[7] via P2P/IPC/read",
        "qh100-gpu19:49360:49416 [6] NCCL INFO ncclCommInitRank comm 0x55d900e4a6c0 rank 6 nranks 16 cudaDev 6 "
        "nvmlDev 6 busId ba000 commId 0xd8289d3e6e217d26 - Init COMPLETE"]) + "\n"


def test_ib_with_gdrdma_passes_and_names_the_communicator():
    _facts, found = run(_ib_job("/GDRDMA"), facts=ACTIVE_IB)
    finding = transport(found)
    assert finding.status.value == "pass" and len(found) == 1
    assert finding.observed["communicators"] == {"0xd8289d3e6e217d26": {
        "nranks": 16, "hosts": ["qh100-gpu19", "qh100-gpu20"], "transports": ["NET/IB", "P2P"], "gdr": True}}
    assert "0xd8289d3e6e217d26 (16 ranks) over NET/IB + P2P with GPUDirect RDMA" in finding.message


def test_ib_without_gdrdma_is_said_beside_the_communicator():
    _facts, found = run(_ib_job(""))
    finding = transport(found)
    assert finding.status.value == "pass"
    assert finding.observed["communicators"]["0xd8289d3e6e217d26"]["gdr"] is False
    assert "without GPUDirect RDMA" in finding.message


def test_roce_is_named_where_nccl_listed_roce_devices():
    text = ROCE_185 + "\n" + _ib_job("/GDRDMA").replace(IB_1357 + "\n", "")
    _facts, found = run(text)
    assert transport(found).observed["communicators"]["0xd8289d3e6e217d26"]["transports"] == ["NET/IB/RoCE", "P2P"]


# ------------------------------------------------------------------------------------------------ sockets where RDMA is

def test_nccl_net_socket_on_an_ib_machine_fails_with_the_setting():
    text = (SOCKET_676 + "gpu01:124172:124452 [0] NCCL INFO NCCL_NET set by environment to Socket.\n"
            "gpu01:124172:124452 [0] NCCL INFO comm 0x7f00 rank 0 nranks 2 cudaDev 0 busId 7000 - Init START\n"
            "gpu02:20868:20914 [0] NCCL INFO comm 0x7e00 rank 1 nranks 2 cudaDev 0 busId 7000 - Init START\n"
            "gpu01:124172:124452 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0\n"
            "gpu02:20868:20914 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/Socket/0\n")
    _facts, found = run(text, facts=None)
    assert transport(found).status.value == "pass"  # nothing says this cluster has RDMA NICs: Ethernet-only is fine
    _facts, found = run(text, facts=ACTIVE_IB)
    finding = transport(found)
    assert finding.status.value == "fail"
    assert "1 active InfiniBand/RoCE ports (mlx5_0:1)" in finding.message
    assert "because NCCL_NET=Socket is set" in finding.message
    assert finding.observed["communicators"] == {"nranks=2": {
        "nranks": 2, "hosts": ["gpu01", "gpu02"], "transports": ["NET/Socket"], "gdr": None}}
    assert [e.line for e in finding.evidence][:1] == [3]  # the setting first, then the socket channels
    assert "over NET/Socket." in finding.message  # GPUDirect RDMA is not said of sockets


def test_no_ib_device_on_an_ib_machine_fails_with_nccls_reason_published():
    _facts, found = run(NO_DEVICE_952)
    assert transport(found).status.value == "pass"  # no IB anywhere in the log or the machine: not a fallback
    _facts, found = run(NO_DEVICE_952, facts=ACTIVE_IB)
    finding = transport(found)
    assert finding.status.value == "fail" and "no IB/RoCE device is visible" in finding.message
    assert [e.line for e in finding.evidence] == [1, 3, 4]


def test_single_node_job_on_sockets_and_p2p_is_no_finding():
    text = ("h1:5:6 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n"
            "h1:5:6 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1b000 - Init START\n"
            "h1:5:7 [1] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 1 busId 3b000 - Init START\n"
            "h1:5:6 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read\n"
            "h1:5:7 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [send] via NET/Socket/0\n"
            "h1:5:6 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE\n")
    _facts, found = run(text, facts=ACTIVE_IB)
    finding = transport(found)
    assert finding.status.value == "pass" and len(found) == 1
    assert finding.observed["inter_node"] == {}


# ------------------------------------------------------------------------------------------------ GPUDirect RDMA off

def test_gdr_off_without_peer_memory_module_warns_with_the_fix():
    text = _ib_job("").replace(IB_1357, IB_1357 + "\nqh100-gpu20:39636:39690 [7] NCCL INFO NET/IB : GPU Direct RDMA "
                                              "Disabled for HCA 0 'mlx5_0' (no module)")
    _facts, found = run(text)
    [gdr] = [f for f in of(found, "nccl.transport") if f.status.value == "warn"]
    assert gdr.subject.host == "qh100-gpu20" and "no module" in gdr.message
    assert "nvidia-peermem" in gdr.fix


def test_gdr_off_by_nccls_distance_rule_alone_is_no_warning():
    text = _ib_job("").replace(IB_1357, IB_1357 + "\nqh100-gpu20:39636:39690 [7] NCCL INFO GPU Direct RDMA Disabled "
                                              "for GPU 7 / HCA 0 (distance 8 > 5)")
    _facts, found = run(text)
    assert [f.status.value for f in found] == ["pass"]


def test_gdr_off_under_a_gdr_level_setting_warns_with_the_setting():
    text = _ib_job("").replace(IB_1357, IB_1357 + "\nqh100-gpu20:39636:39690 [7] NCCL INFO NCCL_NET_GDR_LEVEL set by "
                               "environment to LOC.\nqh100-gpu20:39636:39690 [7] NCCL INFO GPU Direct RDMA Disabled "
                               "for GPU 7 / HCA 0 (distance 3 > 0)")
    _facts, found = run(text)
    [gdr] = [f for f in found if f.status.value == "warn"]
    assert "NCCL_NET_GDR_LEVEL=LOC" in gdr.message and len(gdr.evidence) == 2


# ------------------------------------------------------------------------------------------------ OFI / EFA

# aws-ofi-nccl's line as AWS's EKS EFA guide prints it (`NET/OFI Selected Provider is efa`); channels rebuilt.
def _efa_job(via):
    return ("[1,0]<stdout>:test-nccl-efa-worker-0:21:21 [0] NCCL INFO NET/OFI Selected Provider is efa (found 1 nics)\n"
            "[1,0]<stdout>:test-nccl-efa-worker-0:21:21 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 "
            "commId 0xabc - Init START\n"
            "[1,1]<stdout>:test-nccl-efa-worker-1:22:22 [0] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 0 busId 1000 "
            "commId 0xabc - Init START\n"
            f"[1,0]<stdout>:test-nccl-efa-worker-0:21:21 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via {via}\n"
            f"[1,1]<stdout>:test-nccl-efa-worker-1:22:22 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via {via}\n")


def test_efa_through_the_ofi_plugin_passes_with_gdr():
    _facts, found = run(_efa_job("NET/AWS Libfabric/0/GDRDMA"))
    finding = transport(found)
    assert finding.status.value == "pass"
    assert finding.observed["communicators"]["0xabc"]["transports"] == ["NET/AWS Libfabric"]
    assert finding.observed["communicators"]["0xabc"]["gdr"] is True


def test_sockets_where_the_ofi_plugin_found_efa_fail():
    _facts, found = run(_efa_job("NET/Socket/0"))
    finding = transport(found)
    assert finding.status.value == "fail"
    assert "test-nccl-efa-worker-0's OFI net plugin selected the efa provider" in finding.message


def test_sockets_after_ib_failed_follow_from_nccl_ib_missing():
    text = ("a:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>\n"
            "b:1:1 [0] NCCL INFO NET/IB : No device found.\n"
            "b:1:5 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [receive] via NET/Socket/0\n")
    _facts, found = run(text)
    assert [(f.check_id, f.status.value) for f in found if f.status.value == "fail"] == [
        ("nccl.ib_missing", "fail"), ("nccl.transport", "fail")]
    assert transport(found).consequence_of == "nccl.ib_missing"
    _facts, found = run(NO_DEVICE_952, facts=ACTIVE_IB)
    assert transport(found).consequence_of is None  # the log alone does not expect IB: only the machine shows it

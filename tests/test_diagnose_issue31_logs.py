"""diagnose: log recognisers added for issue 31 (NCCL, PyTorch and launcher logs), each tested on lines built from the
printing program's own format string (the source is named per test), never on the real case that showed the gap."""

from __future__ import annotations

from gpuready.facts.log_lines import feed_text
from gpuready.facts.nccl_log_reader import NcclLogReader
from gpuready.facts.torch_log_reader import TorchErrorReader
from gpuready.model import Status
from helpers import judged


def torch_findings(text: str, source: str = "train.log"):
    return judged(feed_text(TorchErrorReader(), source, text), host="node1")


def of(findings, check_id):
    return [f for f in findings if f.check_id == check_id and f.status is not Status.PASS]


# ------------------------------------------------------------------ nccl.timeout from the heartbeat monitor

# torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, heartbeatMonitor(): errorMsg = logPrefix() + "Heartbeat monitor
# timed out! Process will be terminated after dumping debug info." + " workMetaList_.size()=" + N; exitMsg =
# "ProcessGroupNCCL's watchdog got stuck for " + heartbeatTimeoutInSec_ + " seconds without making progress in
# monitoring enqueued collectives. …". logPrefix() of torch 2.4+ is `[PG ID 0 PG GUID 0(default_pg) Rank 3] `; the
# lines here are wrapped as a JSON log shipper writes them.
HEARTBEAT = (
    '{"ts": "2025-01-02T03:04:05Z", "msg": "[E1102 10:00:01.000 ProcessGroupNCCL.cpp:1400] [PG ID 0 PG GUID '
    '0(default_pg) Rank 3] Heartbeat monitor timed out! Process will be terminated after dumping debug info. '
    'workMetaList_.size()=7"}\n'
    '{"ts": "2025-01-02T03:04:06Z", "msg": "[F1102 10:00:02.000 ProcessGroupNCCL.cpp:1420] [PG ID 0 PG GUID '
    "0(default_pg) Rank 3] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in "
    'monitoring enqueued collectives."}\n')


def test_heartbeat_monitor_is_a_timeout_naming_rank_and_seconds():
    [timeout] = of(torch_findings(HEARTBEAT), "nccl.timeout")
    assert timeout.status is Status.FAIL
    assert timeout.observed["ranks"] == [3] and timeout.observed["watchdog_stuck_s"] == 480
    assert timeout.observed["pending_work"] == {3: 7}
    assert timeout.subject.rank == 3
    assert "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC" in timeout.fix
    assert [e.line for e in timeout.evidence] == [1, 2]


def test_heartbeat_env_variable_alone_is_no_timeout():
    text = "export TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=1200\nexport TORCH_NCCL_ENABLE_MONITORING=0\n"
    assert of(torch_findings(text), "nccl.timeout") == []


# ------------------------------------------------------------------ NCCL: no interface, IB plugin without a device

def nccl_findings(text: str, source: str = "nccl.log"):
    return judged(feed_text(NcclLogReader(), source, text), host="node1")


def test_bootstrap_no_socket_interface_as_torch_quotes_it():
    # NCCL src/bootstrap.cc: WARN("Bootstrap : no socket interface found"); torch raises it as the `Last error:` of
    # an ncclInternalError (the wording of torch's NCCLUtils getNcclErrorDetailStr), with a rank prefix.
    text = ("[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, internal error"
            " - please report this issue to the NCCL developers, NCCL version 2.20.5\n"
            "[rank1]: ncclInternalError: Internal check failed.\n"
            "[rank1]: Last error:\n"
            "[rank1]: Bootstrap : no socket interface found\n")
    [wrong] = of(nccl_findings(text), "nccl.wrong_interface")
    assert wrong.status is Status.FAIL and wrong.observed["reasons"] == ["bootstrap"]
    assert "NCCL_SOCKET_IFNAME" in wrong.fix and [e.line for e in wrong.evidence] == [4]


def test_socket_creation_without_address_family_names_the_setting():
    # NCCL src/misc/socket.cc: WARN("ncclSocketInit: Socket creation failed : %s", strerror(errno)) with EAFNOSUPPORT,
    # and src/init.cc's INFO for an environment variable (`NCCL_SOCKET_IFNAME set by environment to …`).
    text = ("gpu7:811:811 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to =ens99\n"
            "gpu7:811:811 [0] misc/socket.cc:484 NCCL WARN ncclSocketInit: Socket creation failed : "
            "Address family not supported by protocol\n"
            "gpu7:811:811 [0] NCCL INFO bootstrap.cc:90 -> 2\n")
    [wrong] = of(nccl_findings(text), "nccl.wrong_interface")
    assert wrong.observed == {"reasons": ["family"], "NCCL_SOCKET_IFNAME": "=ens99"}
    assert wrong.subject.host == "gpu7" and "=ens99" in wrong.message


IB_PLUGIN_NO_DEVICE = (
    # NCCL src/plugin/net.cc INFO "NET/Plugin: Loaded net plugin %s (v%d)"; nccl-rdma-sharp-plugins' "P2P plugin
    # %s"; its ibvwrap "NET/IB : No device found."; NCCL's "Using network %s".
    "dgx-a:40:40 [0] NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin v7 (v7)\n"
    "dgx-a:40:52 [0] NCCL INFO P2P plugin IBext_v7\n"
    "dgx-a:40:52 [0] NCCL INFO NET/IB : No device found.\n"
    "dgx-a:40:52 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.2.3<0>\n"
    "dgx-a:40:52 [0] NCCL INFO Using network Socket\n")


def test_ib_plugin_loaded_without_an_ib_device_is_a_warning():
    [ib] = of(nccl_findings(IB_PLUGIN_NO_DEVICE), "nccl.ib_missing")
    assert ib.status is Status.WARN and ib.observed["reasons"] == ["no_device"]
    assert "net plugin" in ib.message


def test_libibverbs_missing_on_one_node_without_ib_plugin_is_quiet():
    # NCCL 2.4 misc/ibvwrap.cc: WARN("Failed to open libibverbs.so[.1]"): NCCL tries IB first on every machine.
    text = ("box:9:9 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
            "box:9:9 [0] NCCL INFO NET/Socket : Using [0]eth0:10.2.3.4<0>\n")
    assert of(nccl_findings(text), "nccl.ib_missing") == []


def test_libibverbs_missing_while_sockets_run_over_ipoib_fails():
    # NCCL misc/ibvwrap.cc INFO "Failed to open libibverbs.so[.1]" and net_socket.cc INFO "NET/Socket : Using %s"
    # (`[0]name:address<0>`): the socket transport on `ibp65s0`, the kernel's IPoIB name, means IB is there.
    text = ("n1:70:70 [0] NCCL INFO Failed to open libibverbs.so[.1]\n"
            "n1:70:70 [0] NCCL INFO NET/Socket : Using [0]ibp65s0:192.168.50.11<0>\n"
            "n1:70:70 [0] NCCL INFO Using network Socket\n")
    [ib] = of(nccl_findings(text), "nccl.ib_missing")
    assert ib.status is Status.FAIL and ib.observed["reasons"] == ["libibverbs"] and "ibp65s0" in ib.message


# ------------------------------------------------------------------ network.unreachable from a broken peer socket

# NCCL src/misc/socket.cc: WARN("socketProgressOpt: Call to send to %s failed : %s", addr, strerror(errno)), the
# address printed as `ip<port>`; torch (NCCLUtils.hpp) raises it as the `Last error:` of an ncclRemoteError.
REMOTE = ("[rank5]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:2027, remote process "
          "exited or there was a network error, NCCL version 2.19.3\n"
          "[rank5]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
          "prematurely.\n"
          "[rank5]: Last error:\n"
          "[rank5]: socketProgressOpt: Call to send to 10.10.1.7<45321> failed : Broken pipe\n")


def test_remote_error_over_a_broken_socket_is_a_network_finding():
    [lost] = of(torch_findings(REMOTE), "network.unreachable")
    assert lost.status is Status.WARN and lost.observed["peer"] == "10.10.1.7<45321>"
    assert lost.subject.rank == 5 and "ib_write_bw" in lost.fix


def test_broken_socket_after_a_rank_failed_is_not_the_network():
    # torch.distributed.elastic's ChildFailedError summary: the failed rank explains the peer's broken socket.
    failed = ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
              "Root Cause (first observed failure):\n"
              "[0]:\n  time      : 2024-05-01_10:00:00\n  host      : nodeb\n  rank      : 9 (local_rank: 1)\n"
              "  exitcode  : 1 (pid: 4242)\n")
    assert of(torch_findings(failed + REMOTE), "network.unreachable") == []


# ------------------------------------------------------------------ pcie.acs_iommu from an IB local protection error

def test_ib_local_protection_error_points_at_acs():
    # NCCL 2.19+ src/transport/net_ib.cc: WARN("NET/IB : Got completion from peer %s with status=%d opcode=%d len=%d
    # vendor err %d (%s)%s%s%s%s", …); status 4 is ibv_wc_status IBV_WC_LOC_PROT_ERR (rdma-core verbs.h).
    text = ("gpu-b:310:355 [3] transport/net_ib.cc:1700 NCCL WARN NET/IB : Got completion from peer 192.168.9.4<51234>"
            " with status=4 opcode=0 len=131072 vendor err 81 (Recv) localGid ::ffff:192.168.9.5 remoteGid "
            "::ffff:192.168.9.4\n"
            "gpu-b:310:355 [3] NCCL INFO transport/net.cc:1134 -> 6\n")
    findings = nccl_findings(text)
    [acs] = of(findings, "pcie.acs_iommu")
    assert acs.status is Status.WARN and acs.observed["ibv_wc_status"] == 4 and acs.subject.host == "gpu-b"
    assert "ECAP_ACS" in acs.fix and [e.line for e in acs.evidence] == [1]


def test_ib_retry_exceeded_is_no_acs_finding():
    # status 12 is IBV_WC_RETRY_EXC_ERR: the peer never answered (a link), not the PCIe path.
    text = ("gpu-b:310:355 [3] NCCL WARN NET/IB : Got completion from peer 192.168.9.4<51234> with error 12, "
            "opcode 0, len 0, vendor err 129 (Send)\n")
    assert of(nccl_findings(text), "pcie.acs_iommu") == []


# ------------------------------------------------------------------ ncclSystemError on one node, no NCCL_DEBUG

def test_system_error_without_nccl_debug_names_dev_shm_as_a_warning():
    # nccl-tests src/common.h: printf("%s: Test NCCL failure %s:%d '%s / %s'\n", hostname, __FILE__, __LINE__,
    # ncclGetErrorString(res), ncclGetLastError(NULL)); ncclGetErrorString(ncclSystemError) = "unhandled system error".
    text = "box1: Test NCCL failure common.cu:1005 'unhandled system error (run with NCCL_DEBUG=INFO for details) / '\n"
    [shm] = of(nccl_findings(text, "all_reduce.txt"), "nccl.shm_too_small")
    assert shm.status is Status.WARN and shm.observed["result"] == "ncclSystemError"
    assert "NCCL_DEBUG=WARN" in shm.fix and "--shm-size" in shm.fix


def test_system_error_with_nccl_debug_naming_the_cause_is_no_shm_hint():
    # torch 1.x torch/csrc/cuda/nccl.cpp: "NCCL Error " + status + ": " + ncclGetErrorString(status), after NCCL's
    # bootstrap.cc WARN that names the real cause.
    text = ("h:1:1 [0] bootstrap.cc:40 NCCL WARN Bootstrap : no socket interface found\n"
            "RuntimeError: NCCL Error 2: unhandled system error\n")
    findings = nccl_findings(text)
    assert of(findings, "nccl.shm_too_small") == [] and len(of(findings, "nccl.wrong_interface")) == 1


def test_system_error_whose_last_error_names_the_call_is_no_shm_hint():
    # torch's NCCLUtils getNcclErrorDetailStr: `ncclSystemError: System call (e.g. socket, malloc) or external library
    # call failed or device error.` then `Last error:` and NCCL's own WARN text (net_ib.cc `Call to ibv_reg_mr failed`).
    text = ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error "
            "(run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
            "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n"
            "Last error:\n"
            "Call to ibv_reg_mr failed with error Bad address\n")
    reader_n = feed_text(NcclLogReader(), "train.log", text)
    reader_t = feed_text(TorchErrorReader(), "train.log", text)
    findings = judged(reader_n, reader_t, host="node1")
    assert of(findings, "nccl.shm_too_small") == []


def test_cuda_217_as_nccls_last_error_is_peer_access_unsupported():
    """NCCL quotes its last CUDA error under torch's `Last error:`: `Cuda failure %d '%s'` (NCCL src/include/checks.h
    CUDACHECK) with cudaGetErrorString(cudaErrorPeerAccessUnsupported = 217), "peer access is not supported between
    these two devices" (CUDA Runtime API, driver_types.h). Torch's text as ProcessGroupNCCL.cpp formats it, behind
    torch 2.4's rank prefix: the quoted line is both the NCCL error's detail and the P2P finding's evidence."""
    text = ("[rank1]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
            "ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
            "[rank1]: ncclUnhandledCudaError: Call to CUDA function failed.\n"
            "[rank1]: Last error:\n"
            "[rank1]: Cuda failure 217 'peer access is not supported between these two devices'\n")
    findings = torch_findings(text)
    [p2p] = of(findings, "nccl.p2p_unsupported")
    assert p2p.status == Status.FAIL and [e.line for e in p2p.evidence] == [4]
    assert [f.status for f in of(findings, "nccl.error")] == [Status.FAIL]


def test_a_last_error_of_another_cuda_failure_is_no_p2p_finding():
    text = ("NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error, NCCL version 2.21.5\n"
            "ncclUnhandledCudaError: Call to CUDA function failed.\n"
            "Last error:\n"
            "Cuda failure 2 'out of memory'\n")
    assert all(finding.check_id != "nccl.p2p_unsupported" for finding in torch_findings(text))

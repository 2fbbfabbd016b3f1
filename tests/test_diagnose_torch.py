"""diagnose: the PyTorch-distributed reader on published tracebacks (tests/fixtures/diagnose/torch) and constructed
cases."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from gpuready.facts import torch_errors as parse
from gpuready.model import Status
from gpuready.facts.log_lines import feed_text
from helpers import judged
from gpuready.facts.torch_log_reader import TorchErrorReader

FIXTURES = Path(__file__).parent / "fixtures" / "diagnose" / "torch"


def run(*files: str, text: dict[str, str] | None = None, reader: TorchErrorReader | None = None):
    reader = reader or TorchErrorReader()
    for name in files:
        feed_text(reader, name, (FIXTURES / name).read_text())
    for name, body in (text or {}).items():
        feed_text(reader, name, body)
    return judged(reader, host="node1")


def only(findings, check_id):
    matches = [f for f in findings if f.check_id == check_id]
    assert len(matches) == 1, [f.check_id for f in findings]
    return matches[0]


def lines_of(finding):
    return [(e.file, e.line) for e in finding.evidence]


# ------------------------------------------------------------------ published tracebacks

def test_watchdog_absent_ranks_are_suspects():
    findings = run("watchdog_llamafactory_7396.log")
    timeout = only(findings, "nccl.timeout")
    assert timeout.status is Status.FAIL
    assert timeout.observed["seq"] == 1580 and timeout.observed["collective"] == "ALLREDUCE"
    assert timeout.observed["numel_in"] == 466119168 and timeout.observed["timeout_ms"] == 600000
    assert timeout.observed["ranks_at_seq"] == [0, 3, 4]
    assert timeout.observed["suspects"] == [1, 2]
    assert timeout.observed["last_enqueued"] == {0: 1582, 3: 1582}
    assert lines_of(timeout) == [("watchdog_llamafactory_7396.log", n) for n in (1, 2, 3, 4)]
    assert "TORCH_NCCL_DUMP_ON_TIMEOUT" in timeout.fix and "gpuready diagnose" in timeout.fix


def test_watchdog_all_ranks_timed_out_no_suspect():
    timeout = only(run("watchdog_basicsr_737.log"), "nccl.timeout")
    assert timeout.observed["seq"] == 808
    assert timeout.observed["ranks_at_seq"] == [0, 1, 2]
    assert timeout.observed["suspects"] == []
    assert timeout.subject.rank is None
    assert [e.line for e in timeout.evidence] == [1, 2, 3, 4, 5]


def test_watchdog_lower_seqnum_rank_is_behind():
    timeout = only(run("watchdog_pytorch_118369.log"), "nccl.timeout")
    assert timeout.observed["timed_out"] == {0: 96117, 7: 64088}
    assert timeout.observed["suspects"] == [7]
    assert timeout.subject.rank == 7
    assert timeout.observed["numel_in"] is None  # old torch: no NumelIn
    assert lines_of(timeout) == [("watchdog_pytorch_118369.log", 2), ("watchdog_pytorch_118369.log", 5)]


def test_childfailederror_root_cause_sigkill():
    failed = only(run("elastic_cppo_6.log"), "torch.rank_failed")
    assert failed.status is Status.FAIL
    assert failed.subject.rank == 0
    assert failed.subject.host == "mlxlab115rp2n7682d40d9-20250521025625-6dyyd3-8nir8b-worker"
    assert failed.observed["exitcode"] == -9 and failed.observed["signal"] == "SIGKILL"
    assert failed.observed["pid"] == 14750
    assert "dmesg" in failed.fix and "oom" in failed.fix.lower()
    assert [e.line for e in failed.evidence] == [9, 10, 11, 12, 13]


def test_elastic_failed_line_and_sigterm_consequences():
    findings = run("elastic_colossalai_3514.log")
    failed = only(findings, "torch.rank_failed")
    assert failed.observed["local_rank"] == 3 and failed.observed["exitcode"] == -9
    assert lines_of(failed) == [("elastic_colossalai_3514.log", 4)]
    terminated = only(findings, "torch.ranks_terminated")
    assert terminated.consequence_of == "torch.rank_failed"
    assert terminated.observed["processes"] == 3
    assert [e.line for e in terminated.evidence] == [1, 2, 3]


def test_remote_error_with_last_error_on_next_line():
    error = only(run("remote_error_nccl_1928.log"), "nccl.error")
    assert error.observed["kind"] == "ncclRemoteError"
    assert error.observed["nccl_version"] == "2.28.8"
    assert error.observed["last_error"].startswith("NET/OFI Request 0x7f14cc5b60c0 completed with error")
    assert error.subject.rank == 3
    assert error.consequence_of is None  # no other rank's failure in this input
    assert [e.line for e in error.evidence] == [2, 3, 4, 5]


def test_internal_error_last_error():
    error = only(run("internal_error_nccl_1514.log"), "nccl.error")
    assert error.observed["kind"] == "ncclInternalError"
    assert error.observed["last_error"] == "Net : Connection closed by remote peer user<50260>"
    assert "NCCL_SOCKET_IFNAME" in error.fix


def test_remote_error_one_line_form():
    error = only(run("remote_error_alpaca_207.log"), "nccl.error")
    assert error.observed["kind"] == "ncclRemoteError"
    assert error.observed["last_error"].startswith("NET/IB : Got completion from peer 11.214.147.122<39138>")


def test_oom_on_one_rank():
    findings = run("oom_msswift_6301.log")
    oom = only(findings, "torch.oom")
    assert oom.status is Status.FAIL and oom.subject.rank == 11
    assert oom.observed["cuda_device"] == 3
    assert oom.observed["tried_bytes"] == int(4.35 * 2**30)
    assert oom.observed["free_bytes"] == int(1.70 * 2**30)
    assert oom.observed["total_bytes"] == int(63.42 * 2**30)
    assert lines_of(oom) == [("oom_msswift_6301.log", 2)]


def test_driver_too_old():
    mismatch = only(run("driver_too_old_fooocus_1313.log"), "software.driver_cuda")
    assert mismatch.status is Status.FAIL
    assert mismatch.observed["driver_supports_cuda"] == "11.4"
    assert "driver" in mismatch.fix


def test_driver_too_old_with_torch_build_names_required_driver():
    findings = run("driver_too_old_fooocus_1313.log", text={"pip.txt": "torch==2.1.0+cu121\n"})
    mismatch = only(findings, "software.driver_cuda")
    assert mismatch.observed["torch_cuda"] == "12.1"
    assert mismatch.observed["required_driver"] == "525.60.13"
    assert ">= 525.60.13" in mismatch.fix and "530.30.02" in mismatch.fix
    assert ("pip.txt", 1) in lines_of(mismatch)


def test_undefined_nccl_symbol():
    mismatch = only(run("undefined_symbol_paddle_74792.log"), "software.nccl")
    assert mismatch.observed["symbol"] == "ncclCommInitRankScalable"
    assert "pip list" in mismatch.fix


def test_p2p_unsupported():
    p2p = only(run("p2p_dynamo_1229.log"), "nccl.p2p_unsupported")
    assert p2p.status is Status.FAIL and "NCCL_P2P_DISABLE=1" in p2p.fix
    assert lines_of(p2p) == [("p2p_dynamo_1229.log", 1)]


def test_tcpstore_timeout():
    net = only(run("tcpstore_timeout_controlnet_382.log"), "network.unreachable")
    assert net.status is Status.FAIL
    assert (net.observed["host"], net.observed["port"], net.observed["kind"]) == ("127.0.0.1", 48391, "timeout")
    assert [e.line for e in net.evidence] == [2, 3]


def test_connect_errno_timed_out_and_reset():
    net = only(run("connect_timedout_rlswarm_197.log"), "network.unreachable")
    assert (net.observed["host"], net.observed["port"], net.observed["kind"]) == ("198.18.0.1", 3254, "timeout")
    reset = only(run("tcpstore_reset_vllmswift_9.log"), "network.unreachable")
    assert (reset.observed["host"], reset.observed["port"], reset.observed["kind"]) == ("100.64.0.1", 59782, "reset")


# ------------------------------------------------------------------ constructed cases

OOM_THEN_TIMEOUTS = """\
[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 2 has a total capacity of 79.10 GiB of which 1.00 GiB is free.
[rank0]:[E1 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.
[rank1]:[E1 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600013 milliseconds before timing out.
[rank3]:[E1 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600014 milliseconds before timing out.
[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL version 2.21.5
"""


def test_oom_then_timeouts_are_consequences():
    findings = run(text={"job.log": OOM_THEN_TIMEOUTS})
    oom = only(findings, "torch.oom")
    assert oom.subject.rank == 2
    timeout = only(findings, "nccl.timeout")
    assert timeout.consequence_of == "torch.oom"
    assert timeout.observed["ranks_at_seq"] == [0, 1, 3]
    assert timeout.observed["suspects"] == [2]
    assert timeout.subject.rank == 2
    remote = only(findings, "nccl.error")
    assert remote.observed["kind"] == "ncclRemoteError" and remote.consequence_of == "torch.oom"


def test_timeout_before_oom_is_not_its_consequence():
    text = "\n".join(reversed(OOM_THEN_TIMEOUTS.splitlines()[:3]))
    timeout = only(run(text={"late.log": text}), "nccl.timeout")
    assert timeout.consequence_of is None


def test_last_enqueued_below_seq_is_suspect_interleaved():
    text = (
        "[default1]:[E ProcessGroupNCCL.cpp:1] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=BROADCAST, NumelIn=8, NumelOut=8, Timeout(ms)=1000) ran for 1001 milliseconds before timing out.\n"
        "[default0]:[E ProcessGroupNCCL.cpp:1] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=BROADCAST, NumelIn=8, NumelOut=8, Timeout(ms)=1000) ran for 1002 milliseconds before timing out.\n"
        "[default2]:[E ProcessGroupNCCL.cpp:2] [PG 0 Rank 2] Exception (either an error or timeout) detected by watchdog at work: 9, last enqueued NCCL work: 8, last completed NCCL work: 8.\n"
    )
    timeout = only(run(text={"t.log": text}), "nccl.timeout")
    assert timeout.observed["suspects"] == [2]
    assert timeout.observed["collective"] == "BROADCAST"


def test_watchdog_abort_is_consequence_of_timeout():
    text = OOM_THEN_TIMEOUTS.splitlines()[1] + "\n" + (FIXTURES / "elastic_cppo_6.log").read_text().replace(
        "-9 (pid: 14750)", "-6 (pid: 14750)")
    findings = run(text={"abort.log": text})
    failed = only(findings, "torch.rank_failed")
    assert failed.observed["exitcode"] == -6 and failed.consequence_of == "nccl.timeout"


def test_connection_refused_and_firewall_pattern():
    text = (
        "node2:100:100 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        "[W socket.cpp:752] [c10d] The client socket has failed to connect to [10.0.0.1]:29500 (errno: 110 - Connection timed out).\n"
        "[W socket.cpp:752] [c10d] The client socket has failed to connect to [10.0.0.9]:29500 (errno: 111 - Connection refused).\n"
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:29501 (errno: 98 - Address already in use).\n"
    )
    findings = run(text={"net.log": text})
    firewall = only(findings, "network.firewall")
    assert firewall.status is Status.WARN
    assert (firewall.observed["host"], firewall.observed["port"]) == ("10.0.0.1", 29500)
    assert lines_of(firewall) == [("net.log", 2), ("net.log", 1)]
    unreachable = {(f.observed["host"], f.observed["kind"]): f for f in findings if f.check_id == "network.unreachable"}
    assert unreachable[("10.0.0.1", "timeout")].consequence_of == "network.firewall"
    refused = unreachable[("10.0.0.9", "refused")]
    assert refused.status is Status.FAIL and refused.consequence_of is None and refused.observed["port"] == 29500
    assert "MASTER_ADDR" in refused.fix
    in_use = only(findings, "network.port_in_use")
    assert in_use.observed["port"] == 29501


def test_timeout_without_answering_host_is_not_firewall():
    findings = run("tcpstore_timeout_controlnet_382.log")
    assert not [f for f in findings if f.check_id == "network.firewall"]


def _fr_entry(record_id, seq, state, op="nccl:all_reduce"):
    return {"record_id": record_id, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": seq,
            "p2p_seq_id": 0, "op_id": seq, "profiling_name": op, "time_created_ns": 1000 + record_id,
            "input_sizes": [[4]], "output_sizes": [[4]], "state": state, "time_discovered_started_ns": None,
            "time_discovered_completed_ns": 2000 + record_id if state == "completed" else None, "retired": True,
            "timeout_ms": 600000, "is_p2p": False, "frames": []}


def _fr_dump(entries):
    return {"version": "2.4", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2]"}},
            "pg_status": {}, "entries": entries}


def test_flight_recorder_json_rank_behind(tmp_path):
    reader = TorchErrorReader()
    ahead = _fr_dump([_fr_entry(i, i + 1, "completed") for i in range(4)] + [_fr_entry(4, 5, "started")])
    behind = _fr_dump([_fr_entry(i, i + 1, "completed") for i in range(3)])
    for rank, document in ((0, ahead), (1, ahead), (2, behind)):
        path = tmp_path / f"nccl_trace_rank_{rank}"
        path.write_text(json.dumps(document))
        assert reader.offer_file(path, f"dumps/nccl_trace_rank_{rank}") is True
    findings = judged(reader, host="node1")
    behind_finding = only(findings, "nccl.rank_behind")
    assert behind_finding.status is Status.FAIL and behind_finding.subject.rank == 2
    assert behind_finding.observed["behind"] == [2]
    ranks = behind_finding.observed["ranks"]
    assert ranks["0"] == {"last_enqueued": 5, "last_started": 5, "last_completed": 4, "last_op": "nccl:all_reduce"}
    assert ranks["2"]["last_completed"] == 3


def test_flight_recorder_all_stuck_in_same_collective(tmp_path):
    dump = _fr_dump([_fr_entry(0, 1, "completed"), _fr_entry(1, 2, "started")])
    summaries = []
    for rank in (0, 1):
        path = tmp_path / f"nccl_trace_rank_{rank}.json"
        path.write_text(json.dumps(dump))
        summaries.append(parse.read_flight_recorder_json(path))
    assert [s.rank for s in summaries] == [0, 1]
    reader = TorchErrorReader()
    for summary in summaries:
        reader.add_flight_recorder(summary)
    finding = only(judged(reader, host="node1"), "nccl.flight_recorder")
    assert finding.status is Status.FAIL and finding.observed["stuck"] == [0, 1]


def test_not_a_flight_recorder_file_is_left_to_lines(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"entries": [{"a": 1}]}))
    assert TorchErrorReader().offer_file(path) is False
    assert parse.read_flight_recorder_json(path) is None


@pytest.fixture
def no_unpickling(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("pickle must never be loaded")
    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)
    monkeypatch.setattr("pickle._Unpickler", refuse, raising=False)


def test_pickle_dump_is_reported_never_unpickled(tmp_path, no_unpickling):
    # a pickle stream (protocol 4) that would run code when loaded: never handed to pickle
    payload = (b"\x80\x04\x95\x30\x00\x00\x00\x00\x00\x00\x00\x8c\x05posix\x94\x8c\x06system\x94\x93\x94"
               b"\x8c\x0ctouch /tmp/x\x94\x85\x94R\x94\x8c\x07entries\x94.")
    path = tmp_path / "nccl_trace_rank_0"
    path.write_bytes(payload)
    assert parse.read_flight_recorder_json(path) is None
    reader = TorchErrorReader()
    assert reader.offer_file(path, "dumps/nccl_trace_rank_0") is True
    finding = only(judged(reader, host="node1"), "nccl.flight_recorder_unread")
    assert finding.status is Status.WARN
    assert "torchfrtrace" in finding.fix and "fr_trace" in finding.fix
    assert finding.observed == {"file": "dumps/nccl_trace_rank_0", "format": "pickle"}


def test_a_pickle_dump_among_the_inputs_is_reported_not_read(no_unpickling, tmp_path):
    """Through the framework: a pickle on disk goes to offer_file (never unpickled); its bytes are not read as text."""
    from gpuready.verbs.diagnose.run import diagnose
    (tmp_path / "dump.pkl").write_bytes(b"\x80\x04\x95 }\x94(\x8c\x07version\x94\x8c\x032.4\x94\x8c\x07entries\x94]"
                                        b"\x94\nCUDA out of memory. Tried to allocate 1.00 GiB\n")
    report = diagnose([tmp_path / "dump.pkl"])
    assert [f.check_id for f in report.findings] == ["nccl.flight_recorder_unread"]
    assert report.facts["diagnose"]["inputs"][0]["kind"] == "flight recorder (pickle, not read)"


def test_state_is_bounded():
    line = ("[rank{r}]:[E1 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1) ran for 2 milliseconds "
            "before timing out.")
    reader = TorchErrorReader()
    feed_text(reader, "big.log", "\n".join(line.format(r=r % 5000) for r in range(20000)))
    feed_text(reader, "net.log", "\n".join(
        f"[c10d] The client socket has failed to connect to [10.0.0.{i % 250}]:29500 (errno: 111 - Connection refused)."
        for i in range(1000)))
    assert len(reader.facts().timeout_lines) <= 16 and len(reader.facts().network) <= 16
    assert len(reader.facts().timeouts) <= 4096
    findings = judged(reader, host="node1")
    assert all(len(f.evidence) <= 5 for f in findings)


# NCCL's ncclGetErrorString (NVIDIA/nccl src/init.cc) for each ncclResult_t of nccl.h, the plain form of NCCL < 2.13
# and the longer form since; PyTorch's C10D_NCCL_CHECK (torch/csrc/distributed/c10d/NCCLUtils.hpp) writes
# "NCCL error in: <file>:<line>, " + ncclGetErrorString(result) + ", NCCL version " + version.
NCCL_ERROR_STRINGS = [
    ("unhandled cuda error", "unhandled cuda error (run with NCCL_DEBUG=INFO for details)", "ncclUnhandledCudaError"),
    ("unhandled system error", "unhandled system error (run with NCCL_DEBUG=INFO for details)", "ncclSystemError"),
    ("internal error", "internal error - please report this issue to the NCCL developers", "ncclInternalError"),
    ("invalid argument", "invalid argument (run with NCCL_DEBUG=WARN for details)", "ncclInvalidArgument"),
    ("invalid usage", "invalid usage (run with NCCL_DEBUG=WARN for details)", "ncclInvalidUsage"),
    ("remote process exited or there was a network error", "remote process exited or there was a network error",
     "ncclRemoteError"),
]


@pytest.mark.parametrize("old,new,kind", NCCL_ERROR_STRINGS, ids=[row[2] for row in NCCL_ERROR_STRINGS])
def test_nccl_error_lines_as_torch_writes_them(old, new, kind):
    where = "/opt/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2006"
    for text, version in ((old, "2.10.3"), (new, "2.21.5")):
        line = f"[rank1]: torch.distributed.DistBackendError: NCCL error in: {where}, {text}, NCCL version {version}"
        assert parse.parse_nccl_error(line) == parse.NcclError(kind=kind, where=where, version=version,
                                                              last_error=None)


def test_parsers():
    """Published lines (tests/fixtures/diagnose/torch/README.md names each issue) and the formats' own definitions."""
    # cudaDriverGetVersion: "1000 * major + 10 * minor" (CUDA Runtime API reference, Version Management)
    assert [parse.cuda_from_driver_api(v) for v in (11040, 12020, 11000, 12080, 13000)] == [
        "11.4", "12.2", "11.0", "12.8", "13.0"]
    assert parse.line_rank("[default3]: boom") == 3
    assert parse.line_rank("[PG ID 0 PG GUID 0(default_pg) Rank 5] x") == 5
    assert parse.line_rank("Traceback (most recent call last):") is None
    # torch < 2.1's message; binary units: 20.00 MiB = 20,971,520; 15.78 GiB = 16,943,645,982.72; 3.12 MiB =
    # 3,271,557.12 bytes (truncated)
    old = parse.parse_cuda_oom("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB "
                               "total capacity; 14.56 GiB already allocated; 3.12 MiB free; 14.70 GiB reserved)")
    assert old == parse.CudaOom(cuda_device=0, tried_bytes=20_971_520, free_bytes=3_271_557,
                                total_bytes=16_943_645_982)
    # torch >= 2.1's, recorded in ms-swift#6301: 4.35 GiB = 4,670,776,934.4; 1.70 GiB = 1,825,361,100.8;
    # 63.42 GiB = 68,096,706,478.08 bytes
    new = parse.parse_cuda_oom((FIXTURES / "oom_msswift_6301.log").read_text().splitlines()[1])
    assert new == parse.CudaOom(cuda_device=3, tried_bytes=4_670_776_934, free_bytes=1_825_361_100,
                                total_bytes=68_096_706_478)
    # PyTorch's getNcclErrorDetailStr puts the enum name on the next line (NVIDIA/nccl#1928, #1514)
    remote = (FIXTURES / "remote_error_nccl_1928.log").read_text().splitlines()
    assert parse.parse_nccl_error(remote[1]) == parse.NcclError(
        kind="ncclRemoteError", where="/opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3763",
        version="2.28.8", last_error=None)
    assert parse.parse_nccl_error(remote[2]) == parse.NcclError(kind="ncclRemoteError", where=None, version=None,
                                                                last_error=None)
    # the old one-line form with "Last error:" (stanford_alpaca#207)
    alpaca = parse.parse_nccl_error((FIXTURES / "remote_error_alpaca_207.log").read_text())
    assert (alpaca.kind, alpaca.where, alpaca.version) == ("ncclRemoteError", None, "2.14.3")
    assert alpaca.last_error == ("NET/IB : Got completion from peer 11.214.147.122<39138> with error 12, opcode 0, "
                                 "len 0, vendor err 129")
    # torch/cuda/__init__.py's capability warning as posted in xorbitsai/inference#3603 (RTX 5090: compute
    # capability 12.0, https://developer.nvidia.com/cuda-gpus)
    arch = parse.parse_version_mismatch("NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible "
                                        "with the current PyTorch installation.")
    assert arch == parse.VersionMismatch(kind="arch", arch="sm_120", gpu_name="NVIDIA GeForce RTX 5090")
    listed = parse.parse_version_mismatch("The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 "
                                          "sm_75 sm_80 sm_86 sm_90.")
    assert listed == parse.VersionMismatch(kind="arch_supported", supported=(
        "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"))
    store = parse.parse_network_error("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for "
                                      "clients. 1/2 clients joined.")
    assert store == parse.NetworkError(kind="store_timeout", host=None, port=None,
                                       reason="Timed out after 901 seconds waiting for clients. 1/2 clients joined.")
"""validate across nodes (issue 33): the transport NCCL used for validate's communicators, beside each busbw figure,
and inter-node busbw judged per NIC.

NCCL cannot run on this CPU-only VM, so:
- (a) the variables a rank gets (runner/nccl_debug.py), exactly;
- (b) NCCL INFO lines written where validate's ranks write them (`<run dir>/nccl.<host>.<pid>.log`), read back as a
  rank reads its own file, and judged with a 2-node result BUILT from the recorded one-rank H200 result
  (tests/fixtures/h200-validate: its collectives' sizes and method; world size, hosts and busbw set here). The lines
  are rebuilt from NCCL's format strings (src/init.cc `ncclCommInitRank comm %p rank %d nranks %d cudaDev %d nvmlDev %d
  busId %lx commId 0x%llx - Init START|COMPLETE`; src/transport.cc `Channel %02d/%d : %d[%d] -> %d[%d] [send|receive]
  via %s`; src/misc/param.cc `%s set by environment to %s.`; net_socket.cc `NET/Socket : Using [%d]%s:%s`) around the
  published `NET/IB : Using …/IB …; OOB …` line of NVIDIA/nccl#1357 (2 nodes × 8 H100), widened to 8 HCAs;
- (c) a gloo CPU 2-"node" run through the existing torchrun path (tests/test_runner_faults.py's way).
Figures written here, not read from knowledge/: 46 GB/s per 400G NDR NIC at large messages (AddyLaddy,
NVIDIA/nccl-tests#290: "46-48GB/s per NIC"), 3 GB/s busbw over sockets between 2 nodes (NVIDIA/aicr#2689).
"""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import FIXTURES
from gpuready.evidence.build import build_facts
from gpuready.evidence.reader import read_bundle
from gpuready.facts.types import IbPort
from rich.console import Console

from gpuready.report.console import render_console
from gpuready.report.html import render_html
from gpuready.report.markdown import markdown_summary
from gpuready.runner.local import RunOutcome
from gpuready.runner.nccl_debug import nccl_debug_env, own_log_path, read_own_lines, wants_nccl_lines
from gpuready.verbs.validate import build_report

RECORDED = json.loads((FIXTURES / "h200-validate" / "rank-results.json").read_text())["results"]["0"]
HOSTS = ("qh100-gpu19", "qh100-gpu20")  # NVIDIA/nccl#1357's two hosts
COMM = "0xd8289d3e6e217d26"  # NVIDIA/nccl#1357's commId
PER_NIC_NDR = 46.0  # nccl-tests#290
SOCKET_BUSBW = 3.0  # aicr#2689
IB_8 = [IbPort(device=f"mlx5_{n}", port=1, state="ACTIVE", rate_gbit_per_s=400.0, link_layer="InfiniBand")
        for n in range(8)]
FACTS = dataclasses.replace(build_facts(read_bundle(FIXTURES / "h200-collect")), ib_ports=IB_8)


# ------------------------------------------------------------------------------------------------ (a) the env

def test_a_rank_gets_nccl_info_lines_in_its_run_dir_where_unset():
    assert nccl_debug_env({}, Path("/runs/r1")) == {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET",
                                                     "NCCL_DEBUG_FILE": "/runs/r1/nccl.%h.%p.log"}


def test_a_users_own_nccl_settings_are_kept():
    assert nccl_debug_env({"NCCL_DEBUG": "WARN"}, Path("/r")) == {"NCCL_DEBUG_SUBSYS": "INIT,NET",
                                                                   "NCCL_DEBUG_FILE": "/r/nccl.%h.%p.log"}
    user = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "ALL", "NCCL_DEBUG_FILE": "/mine/%h.log"}
    assert nccl_debug_env(user, Path("/r")) == {}
    assert nccl_debug_env({"NCCL_DEBUG": ""}, Path("/r"))["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    assert "NCCL_DEBUG" not in nccl_debug_env({"NCCL_DEBUG": ""}, Path("/r"))  # set, even empty: theirs


def test_only_validates_nccl_collectives_across_nodes_ask_for_the_lines():
    spec = {"device": "cuda", "backend": None, "workloads": ["compute", "collectives"]}
    assert wants_nccl_lines(spec, {"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"})
    assert not wants_nccl_lines(spec, {"WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "8"})  # one node
    assert not wants_nccl_lines({**spec, "backend": "gloo"}, {"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"})
    assert not wants_nccl_lines({**spec, "device": "cpu"}, {"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1"})
    assert not wants_nccl_lines({**spec, "workloads": ["train.ddp"]}, {"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"})


def test_the_file_nccl_writes_is_found_as_nccl_names_it():
    # NCCL src/debug.cc: %h is the host name up to its first dot, %p the pid
    assert own_log_path("/r/nccl.%h.%p.log", "node-a.cluster.local", 4242) == Path("/r/nccl.node-a.4242.log")
    assert own_log_path("/r/100%%.%p", "h", 7) == Path("/r/100%.7")


def test_a_rank_without_a_file_says_why():
    assert read_own_lines({"NCCL_DEBUG": "INFO"})["error"] == "NCCL_DEBUG_FILE unset"
    missing = read_own_lines({"NCCL_DEBUG_FILE": "/nonexistent/nccl.%h.%p.log"}, "h", 1)
    assert missing["error"] == "No such file or directory" and missing["lines"] == []


# ------------------------------------------------------------------------------------------------ (b) judged

def _ib_lines(rank: int, host: str, pid: int, dev: int, via: str = "NET/IB/0/GDRDMA") -> list[str]:
    head = f"{host}:{pid}:{pid + 56} [{dev}] NCCL INFO "
    lines = [head + "NET/IB : Using " + " ".join(f"[{n}]mlx5_{n}:1/IB" for n in range(8))
             + f" [RO]; OOB ibp25s0:10.20.0.{120 + HOSTS.index(host)}<0>",
             head + f"ncclCommInitRank comm 0x55d900e4a6c0 rank {rank} nranks 16 cudaDev {dev} nvmlDev {dev} "
                    f"busId ba000 commId {COMM} - Init START"]
    if dev < 7:
        lines.append(head + f"Channel 00/0 : {rank}[{dev}] -> {rank + 1}[{dev + 1}] via P2P/IPC/read")
    else:  # the ring leaves the node: 7 -> 8 and 15 -> 0
        peer = (rank + 1) % 16
        lines.append(head + f"Channel 00/0 : {rank}[7] -> {peer}[0] [send] via {via}")
    if dev == 0:
        lines.append(head + f"Channel 00/0 : {(rank - 1) % 16}[7] -> {rank}[0] [receive] via {via}")
    lines.append(head + f"ncclCommInitRank comm 0x55d900e4a6c0 rank {rank} nranks 16 cudaDev {dev} nvmlDev {dev} "
                        f"busId ba000 commId {COMM} - Init COMPLETE")
    return lines


def _socket_lines(rank: int, host: str, pid: int, dev: int) -> list[str]:
    head = f"{host}:{pid}:{pid + 56} [{dev}] NCCL INFO "
    ib = _ib_lines(rank, host, pid, dev, via="NET/Socket/0")
    return [head + "NCCL_IB_DISABLE set by environment to 1.",
            head + f"NET/Socket : Using [0]eth0:10.20.1.{120 + HOSTS.index(host)}<0>"] + ib[1:]


def _two_nodes(tmp_path: Path, busbw: float, lines_of) -> dict[int, dict]:
    """16 ranks on HOSTS × 8, built from the recorded rank: its collectives (sizes, method), world size 16, busbw set
    to `busbw` at every size; each rank's NCCL lines written where it writes them and read back as it reads them."""
    collectives = copy.deepcopy(RECORDED["workloads"]["collectives"])
    collectives["world_size"] = 16
    for row in collectives["rows"]:
        row["busbw_gb_per_s"] = busbw
    environ = {"NCCL_DEBUG": "INFO", **nccl_debug_env({"NCCL_DEBUG": "INFO"}, tmp_path)}
    results = {}
    for rank in range(16):
        host, dev, pid = HOSTS[rank // 8], rank % 8, 49360 + rank
        own_log_path(environ["NCCL_DEBUG_FILE"], host, pid).write_text("\n".join(lines_of(rank, host, pid, dev)) + "\n")
        result = copy.deepcopy(RECORDED)
        result.update(rank=rank, host=host, local_rank=dev, node_rank=rank // 8)
        result["workloads"] = {"collectives": {**copy.deepcopy(collectives),
                                               "nccl_lines": read_own_lines(environ, host, pid)}}
        results[rank] = result
    return results


def _of(report, check_id):
    return [finding for finding in report.findings if finding.check_id == check_id]


def test_ib_8_nics_at_healthy_busbw_pass_naming_net_ib(tmp_path):
    report = build_report(RunOutcome(results=_two_nodes(tmp_path, 8 * PER_NIC_NDR, _ib_lines)), FACTS, HOSTS[0])
    [transport] = _of(report, "nccl.transport")
    assert transport.status.value == "pass"
    assert f"{COMM} (16 ranks) over P2P + NET/IB with GPUDirect RDMA" in transport.message
    per_nic = _of(report, "nccl.busbw_low")
    assert [f.status.value for f in per_nic] == ["pass"] * 5  # all_reduce … all_to_all; send_recv is not judged
    assert per_nic[0].message.startswith("all_reduce busbw over NET/IB: 368.0 GB/s at ")
    assert "192.0 GB/s floor across 2 nodes × 8 ranks (50% of 8 of the 8 RDMA NIC(s) per node at 400 Gb/s" \
        in per_nic[0].message  # 8 × 400 Gb/s / 8 × 0.96 = 384 GB/s, half of it
    busbw = next(m for m in report.measurements if m.name == "all_reduce_busbw_gb_per_s")
    assert (busbw.method["transport"], busbw.expected, busbw.method["nodes"]) == ("NET/IB", 192.0, 2)
    facts = report.facts["validate"]["nccl_transport"]
    assert facts["transports"] == ["NET/IB"] and facts["communicators"][COMM]["gdr"] is True
    assert len(facts["files"]) == 16 and facts["files"][0] == str(tmp_path / "nccl.qh100-gpu19.49360.log")
    assert report.exit_code() == 0


def test_the_transport_stands_beside_each_busbw_figure_in_every_view(tmp_path):
    report = build_report(RunOutcome(results=_two_nodes(tmp_path, 8 * PER_NIC_NDR, _ib_lines)), FACTS, HOSTS[0])
    document = json.loads(json.dumps(report.to_dict()))
    stream = io.StringIO()
    render_console(document, Console(file=stream, width=400, color_system=None), plain=True)
    console, markdown, html = stream.getvalue(), markdown_summary([document]), render_html([document], "en")
    for view in (console, markdown, html):
        assert "qh100-gpu19 · NET/IB" in view
    assert any(m["method"].get("transport") == "NET/IB" for m in document["measurements"])


def test_sockets_with_active_ib_ports_fail_naming_the_reason(tmp_path):
    report = build_report(RunOutcome(results=_two_nodes(tmp_path, SOCKET_BUSBW, _socket_lines)), FACTS, HOSTS[0])
    [transport] = _of(report, "nccl.transport")
    assert transport.status.value == "fail"
    assert "8 active InfiniBand/RoCE ports" in transport.message
    assert "because NCCL_IB_DISABLE=1 is set" in transport.message
    assert transport.evidence[0].file == str(tmp_path / "nccl.qh100-gpu19.49360.log") and transport.evidence[0].line == 1
    per_nic = _of(report, "nccl.busbw_low")
    assert [f.status.value for f in per_nic] == ["skip"] * 5
    assert "over sockets (NET/Socket)" in per_nic[0].message
    assert report.facts["validate"]["nccl_transport"]["transports"] == ["NET/Socket"]
    assert report.exit_code() == 1


def test_slow_busbw_over_ib_fails_per_nic(tmp_path):
    report = build_report(RunOutcome(results=_two_nodes(tmp_path, PER_NIC_NDR, _ib_lines)), FACTS, HOSTS[0])
    per_nic = _of(report, "nccl.busbw_low")
    assert [f.status.value for f in per_nic] == ["fail"] * 4 + ["pass"]  # all_to_all: one NIC's floor, 19.2 GB/s
    assert "below the 192.0 GB/s floor" in per_nic[0].message and per_nic[0].fix


def test_lines_that_never_came_are_a_skip_with_the_reason(tmp_path):
    results = _two_nodes(tmp_path, 8 * PER_NIC_NDR, _ib_lines)
    for result in results.values():
        result["workloads"]["collectives"]["nccl_lines"] = read_own_lines({"NCCL_DEBUG": "WARN"})
    report = build_report(RunOutcome(results=results), FACTS, HOSTS[0])
    [transport] = _of(report, "nccl.transport")
    assert transport.status.value == "skip" and "rank 0: NCCL_DEBUG_FILE unset" in transport.message
    assert [f.status.value for f in _of(report, "nccl.busbw_low")] == ["pass"] * 5  # the NICs still judge busbw


def test_one_node_runs_keep_their_judgement_without_transport(tmp_path):
    results = {0: copy.deepcopy(RECORDED)}
    report = build_report(RunOutcome(results=results), FACTS, "h200")
    assert not _of(report, "nccl.transport") and "nccl_transport" not in report.facts["validate"]
    assert all("transport" not in m.method for m in report.measurements)


def test_gloo_across_two_hosts_is_not_judged_per_nic(tmp_path):
    results = _two_nodes(tmp_path, 1.0, _ib_lines)
    for result in results.values():
        result["workloads"]["collectives"]["backend"] = "gloo"
        del result["workloads"]["collectives"]["nccl_lines"]
    report = build_report(RunOutcome(results=results), FACTS, HOSTS[0])
    assert not _of(report, "nccl.transport")
    [skip] = _of(report, "nccl.busbw_low")
    assert skip.status.value == "skip" and skip.message.startswith("2 nodes on gloo: busbw is not judged per NIC")


# ------------------------------------------------------------------------------------------------ (c) a gloo run

def test_a_gloo_two_node_torchrun_shows_no_transport_finding(tmp_path):
    from test_runner_faults import _free_port
    endpoint, out = f"127.0.0.1:{_free_port()}", tmp_path / "report.json"
    nodes = [subprocess.Popen([sys.executable, "-m", "gpuready", "validate", "--nnodes", "2", "--nproc-per-node", "1",
                               "--rdzv-endpoint", endpoint, "--device", "cpu", "--quick", "--only", "collectives",
                               "--json", "--out", str(out), "--timeout", "20"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={k: v for k, v in os.environ.items() if not k.startswith("NCCL_")})
             for _ in range(2)]
    outputs = [node.communicate(timeout=240) for node in nodes]
    assert out.exists(), [err[-1500:] for _, err in outputs]
    report = json.loads(out.read_text())
    assert not [f for f in report["findings"] if f["check_id"] == "nccl.transport"]
    assert not [f for f in report["findings"] if f["status"] == "error"]
    assert "nccl_lines" not in json.dumps(report) and "nccl_transport" not in report["facts"]["validate"]
    assert any(m["name"] == "all_reduce_busbw_gb_per_s" for m in report["measurements"])

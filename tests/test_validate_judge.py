"""The judge on rank results recorded on an H200, and expectations from topology (no GPU needed)."""

import copy
import json

import pytest

from conftest import FIXTURES, PUBLIC
from gpuready.bundle.reader import read_bundle
from gpuready.facts.build import build_facts
from gpuready.facts.topology import parse_topo_matrix
from gpuready.facts.types import Facts, GpuFacts
from gpuready.model import Status
from gpuready.verbs.validate import build_report, expect
from gpuready.runner.local import RankFailure, RunOutcome

RESULTS = {int(rank): result for rank, result in
           json.loads((FIXTURES / "h200-validate" / "rank-results.json").read_text())["results"].items()}
FACTS = build_facts(read_bundle(FIXTURES / "h200-collect"))


def judged(results, facts=FACTS, failures=()):
    return build_report(RunOutcome(results=results, failures=list(failures)), facts, "h200")


def findings(report, check_id):
    return [f for f in report.findings if f.check_id == check_id]


def test_recorded_h200_passes_with_expected_values():
    report = judged(RESULTS)
    assert report.verdict().value == "ready" and report.exit_code() == 0
    bf16 = next(m for m in report.measurements if m.name == "matmul_tflops_bf16")
    assert bf16.value > 760 and bf16.expected == pytest.approx(989 * 0.80, rel=0.01)
    assert "H200" in bf16.expected_source and bf16.method["shape"] == [8192, 8192, 8192]
    h2d = next(m for m in report.measurements if m.name == "h2d_pinned_gb_per_s")
    assert h2d.expected == pytest.approx(3.938 * 16 * 0.88, rel=1e-3)
    assert all(f.status == Status.PASS for f in findings(report, "compute.low"))
    assert findings(report, "nccl.busbw_low")[0].status == Status.SKIP  # one rank moves no data


def _with_bf16(value):
    results = copy.deepcopy(RESULTS)
    results[0]["workloads"]["compute"]["matmul"]["bf16"]["tflops"] = value  # lowered in memory: a slow GPU
    return results


def test_slow_gpu_warns_then_fails():
    assert [f.status for f in findings(judged(_with_bf16(500.0)), "compute.low") if "bf16" in f.message] == [Status.WARN]
    assert [f.status for f in findings(judged(_with_bf16(300.0)), "compute.low") if "bf16" in f.message] == [Status.FAIL]


def test_straggler_among_two_gpus():
    results = copy.deepcopy(RESULTS)
    slow = copy.deepcopy(results[0])
    slow["rank"], slow["local_rank"] = 1, 1
    slow["workloads"]["compute"]["matmul"]["bf16"]["tflops"] *= 0.85
    results[1] = slow
    stragglers = findings(judged(results), "compute.straggler")
    assert [(f.subject.rank, f.status) for f in stragglers] == [(1, Status.WARN)]


def test_wrong_collective_data_fails():
    results = copy.deepcopy(RESULTS)
    results[0]["workloads"]["collectives"]["rows"][3]["wrong"] = 5
    assert [f.status for f in findings(judged(results), "nccl.failed")] == [Status.FAIL]


def test_hang_is_exit_4_and_names_the_rank():
    report = judged(RESULTS, failures=[RankFailure(rank=1, kind="hang", detail="stopped advancing")])
    assert report.exit_code() == 4
    assert [f.subject.rank for f in findings(report, "validate.rank_hung")] == [1]


def _gpus(name, count):
    return [GpuFacts(index=i, bus_id=f"0000:{i + 16:02x}:00.0", name=name, pcie_gen_max=4 if "4090" in name else 5,
                     pcie_width_max=16) for i in range(count)]


def test_expected_busbw_and_p2p_from_topology():
    nvswitch = Facts(gpus=_gpus("NVIDIA H100 80GB HBM3", 8),
                     topology=parse_topo_matrix((PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-topo.txt").read_text()))
    busbw = expect.nccl_busbw(nvswitch, nvswitch.gpus, "NVIDIA H100 80GB HBM3")
    assert busbw.value == pytest.approx(450 * 0.82)
    p2p = expect.p2p_copy(nvswitch, nvswitch.gpus[0], nvswitch.gpus[1], "NVIDIA H100 80GB HBM3")
    assert p2p.value == pytest.approx(450 * 0.80)
    pcie = Facts(gpus=_gpus("NVIDIA GeForce RTX 4090", 8),
                 topology=parse_topo_matrix((PUBLIC / "pcie-8gpu-2socket" / "nvidia-smi-topo.txt").read_text()))
    # Pairs across the two sockets (SYS) put a hop of the ring through host memory (tests/test_expectations.py).
    assert expect.nccl_busbw(pcie, pcie.gpus, "NVIDIA GeForce RTX 4090").value == pytest.approx(1.969 * 16 * 0.35)
    assert expect.nccl_busbw(pcie, pcie.gpus[:4], "NVIDIA GeForce RTX 4090").value == pytest.approx(1.969 * 16 * 0.75)

"""The judge on rank results recorded on an H200, and expectations from topology (no GPU needed)."""

import copy
import json

import pytest

from conftest import FIXTURES, PUBLIC
from gpuready.evidence.reader import read_bundle
from gpuready.evidence.build import build_facts
from gpuready.facts.topology import parse_topo_matrix
from gpuready.facts.types import Facts, GpuFacts
from gpuready.model import Status
from gpuready.estimate import expect
from gpuready.verbs.validate import build_report
from gpuready.runner.local import RunOutcome
from gpuready.runner.watchdog import RankFailure

RESULTS = {int(rank): result for rank, result in
           json.loads((FIXTURES / "h200-validate" / "rank-results.json").read_text())["results"].items()}
FACTS = build_facts(read_bundle(FIXTURES / "h200-collect"))


def judged(results, facts=FACTS, failures=()):
    return build_report(RunOutcome(results=results, failures=list(failures)), facts, "h200")


def findings(report, check_id):
    return [f for f in report.findings if f.check_id == check_id]


# Statuses of the judge on the recorded H200 run (tests/fixtures/h200-validate, one rank), in report order.
RECORDED_STATUSES = [
    ("compute.low", "pass"), ("compute.low", "pass"), ("compute.low", "pass"), ("compute.low", "pass"),
    ("compute.low", "pass"), ("memory_bw.low", "pass"), ("transfer.low", "pass"), ("transfer.low", "pass"),
    ("nccl.failed", "pass"), ("nccl.busbw_low", "skip"), ("ddp.mismatch", "pass"),
]
# Published figures, written here, not read from knowledge/:
H200_BF16_DENSE = 989.5  # NVIDIA H200 datasheet: BF16 Tensor Core 1,979 TFLOPS with sparsity = 989.5 dense
H200_BF16_MEASURED_LOW = 783.0  # DESIGN.md §3: 8192³ bf16 on one H200, 783-791 TFLOP/s (probe, outside gpuready)
PCIE_GEN5_X16 = 63.0  # PCIe 5.0: 32 GT/s × 16 lanes × 128/130 / 8 = 63.0 GB/s per direction
H2D_PINNED_MEASURED = 55.4  # DESIGN.md §3: pinned host->device 55.4-55.5 GB/s on the same H200 (probe)


@pytest.mark.parametrize("bundle", ["h200-collect", "h200-docker-collect"])
def test_recorded_h200_run_gets_exactly_these_statuses(bundle):
    report = judged(RESULTS, build_facts(read_bundle(FIXTURES / bundle)))
    assert [(f.check_id, f.status.value) for f in report.findings] == RECORDED_STATUSES
    assert report.verdict().value == "ready" and report.exit_code() == 0
    assert "One rank" in findings(report, "nccl.busbw_low")[0].message  # one rank moves no data


def test_recorded_h200_expectations_sit_under_the_datasheet_and_let_the_probe_figures_pass():
    report = judged(RESULTS)
    bf16 = next(m for m in report.measurements if m.name == "matmul_tflops_bf16")
    assert bf16.value == pytest.approx(793.32, abs=0.01)  # recorded in rank-results.json
    assert bf16.expected < H200_BF16_DENSE and H200_BF16_MEASURED_LOW >= 0.9 * bf16.expected
    assert "H200" in bf16.expected_source and bf16.method["shape"] == [8192, 8192, 8192]
    h2d = next(m for m in report.measurements if m.name == "h2d_pinned_gb_per_s")
    assert h2d.value == pytest.approx(55.51, abs=0.01)
    assert h2d.expected < PCIE_GEN5_X16 and H2D_PINNED_MEASURED >= 0.9 * h2d.expected
    assert "Gen5 x16" in h2d.expected_source
    # The probe's low figures, put in place of the recorded ones, still pass.
    assert [f.status for f in findings(judged(_with_bf16(H200_BF16_MEASURED_LOW)), "compute.low")
            if "bf16" in f.message] == [Status.PASS]


def _with_bf16(value):
    results = copy.deepcopy(RESULTS)
    results[0]["workloads"]["compute"]["matmul"]["bf16"]["tflops"] = value  # lowered in memory: a slow GPU
    return results


def test_slow_gpu_warns_then_fails():
    # Literal figures against the H200's bf16 expectation: 740 is healthy, 500 low, 300 under half.
    assert [f.status for f in findings(judged(_with_bf16(740.0)), "compute.low") if "bf16" in f.message] == [Status.PASS]
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


# Published intra-node figures on NVLink4 + NVSwitch boards (shared/reference/anchors-microbenchmarks.md):
NVLINK4_PER_DIRECTION = 450.0  # NVIDIA: H100/H200 SXM NVLink 900 GB/s bidirectional = 450 GB/s per direction
H200_RING_BUSBW = 367.2  # 8×H200 all_reduce 16 GiB, NCCL_NVLS_ENABLE=0 (stas00/ml-engineering network/README.md)
H100_RING_BUSBW = 365.0  # 8×H100 ring 365-370 GB/s for 2-8 GPUs (NVIDIA/nccl#1455); ~370 (sjeaugey, nccl-tests#212)
H200_NVBANDWIDTH_D2D = 396.40  # nvbandwidth device_to_device_memcpy_write_ce per pair on 8×H200
PCIE_GEN4_X16 = 31.5  # PCIe 4.0: 16 GT/s × 16 lanes × 128/130 / 8 = 31.5 GB/s per direction


def test_expected_busbw_and_p2p_from_topology():
    topology = parse_topo_matrix((PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-topo.txt").read_text())
    for name, ring in (("NVIDIA H100 80GB HBM3", H100_RING_BUSBW), ("NVIDIA H200", H200_RING_BUSBW)):
        nvswitch = Facts(gpus=_gpus(name, 8), topology=topology)
        busbw = expect.nccl_busbw(nvswitch, nvswitch.gpus, name)
        # Below the wire rate, and a healthy ring (the published figure) is not even a warning.
        assert busbw.value < NVLINK4_PER_DIRECTION and ring >= 0.9 * busbw.value, (name, busbw)
        assert "NVLink" in busbw.source
        p2p = expect.p2p_copy(nvswitch, nvswitch.gpus[0], nvswitch.gpus[1], name)
        assert p2p.value < NVLINK4_PER_DIRECTION and H200_NVBANDWIDTH_D2D >= 0.9 * p2p.value, (name, p2p)
        assert p2p.source.startswith("NV18")
    pcie = Facts(gpus=_gpus("NVIDIA GeForce RTX 4090", 8),
                 topology=parse_topo_matrix((PUBLIC / "pcie-8gpu-2socket" / "nvidia-smi-topo.txt").read_text()))
    # Pairs across the two sockets (SYS) put a hop of the ring through host memory (tests/test_expectations.py):
    # a lower expectation than four GPUs under one socket, both under the Gen4 x16 link rate.
    across = expect.nccl_busbw(pcie, pcie.gpus, "NVIDIA GeForce RTX 4090")
    socket0 = expect.nccl_busbw(pcie, pcie.gpus[:4], "NVIDIA GeForce RTX 4090")
    assert across.value < socket0.value < PCIE_GEN4_X16
    assert "SYS pairs" in across.source and "31.5" in across.source


# The recorded 60 s burn on one H200 (tests/fixtures/h200-burn/burn-60s-report.json): bf16 664.85 TFLOP/s.
BURN = json.loads((FIXTURES / "h200-burn" / "burn-60s-report.json").read_text())
H200_SUSTAINED_LOW = 656.0  # DESIGN.md §3: sustained bf16 loop 656 (45 s) - 665 (30 s) TFLOP/s at the 700 W cap


def _burn_throughput(tflops, name="NVIDIA H200", power_limit_w=700.0, default_limit_w=700.0):
    from gpuready.verbs.burn.judge import BurnGpu, BurnJudge
    result = {"iterations": 36300, "dtype": "bf16", "n": 8192, "errors": [], "tolerance_abs": 5.0,
              "reference_checksum": 1.5, "tflops": tflops, "window_start": 0.0, "window_end": 60.0,
              "intervals": [], "memory": {"bytes": 2**33, "wrong_words": 0}}
    gpu = BurnGpu(rank=0, nvml_index=None, identity={"name": name, "bus_id": "0000:00:06.0"}, result=result,
                  power_limit_w=power_limit_w, power_default_limit_w=default_limit_w)
    judge = BurnJudge("h200", [gpu], None, [])
    judge.judge()
    return [f.status.value for f in judge.findings if f.check_id == "burn.throughput_low"], judge


def test_recorded_burn_throughput_passes_and_literal_low_figures_do_not():
    recorded = next(m for m in BURN["measurements"] if m["name"] == "burn_tflops_bf16")
    assert recorded["value"] == 664.85
    assert {f["check_id"]: f["status"] for f in BURN["findings"]} == {
        "burn.errors": "pass", "burn.xid": "pass", "burn.throttle_thermal": "pass", "burn.throttle_hw": "pass",
        "burn.temperature": "pass", "burn.power": "pass", "burn.ecc": "pass", "burn.clock_instability": "pass"}
    statuses, judge = _burn_throughput(recorded["value"])
    assert statuses == ["pass"]
    measurement = next(m for m in judge.measurements if m.name == "burn_tflops_bf16")
    assert measurement.expected < H200_BF16_DENSE and H200_SUSTAINED_LOW >= 0.9 * measurement.expected
    assert _burn_throughput(H200_SUSTAINED_LOW)[0] == ["pass"]
    assert _burn_throughput(400.0)[0] == ["warn"]  # 40 % of the dense peak: low
    assert _burn_throughput(250.0)[0] == ["fail"]  # a quarter of the dense peak: under half of any expectation


@pytest.mark.parametrize("fsdp, english, chinese", [
    ({"status": "skip", "reason": "x", "reason_text": {"message_id": "workloads.fsdp2.quick", "message_values": {}}},
     "; the FSDP2 step was skipped: ", "；FSDP2 步骤已跳过："),
    ({}, "; no FSDP2 step was run.", "；未运行 FSDP2 步骤。"),
])
def test_a_ddp_pass_says_in_words_why_fsdp2_did_not_run(fsdp, english, chinese):
    """Not the workload's status word ("FSDP2 skip: …" read as English inside the Chinese sentence)."""
    from gpuready.i18n import message
    results = copy.deepcopy(RESULTS)
    results[0]["workloads"]["ddp"]["fsdp"] = fsdp
    ddp = findings(judged(results), "ddp.mismatch")[0]
    assert ddp.status == Status.PASS
    rendered = {lang: message(ddp.message_id, lang, **ddp.message_values) for lang in ("en", "zh")}
    assert english in rendered["en"] and chinese in rendered["zh"]
    assert "skip" not in rendered["zh"] and "None" not in rendered["en"]

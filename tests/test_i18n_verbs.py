"""The run verbs' findings (validate, burn, bench, plan, a shared GPU, a stopped run) and the live progress line come
from the message catalogue: the English stays as it was, and with --lang zh every sentence is Chinese (only names,
numbers, units and commands stay as they are)."""

import copy
import io
import json
import re

import pytest
from babel.messages.pofile import read_po
from rich.console import Console

from conftest import FIXTURES
from gpuready.evidence.reader import read_bundle
from gpuready.evidence.build import build_facts
from gpuready.facts.clock_reasons import REASON_BITS
from gpuready.facts.gpu_users import GpuUsers
from gpuready.i18n import LOCALE_DIR
from gpuready.model import Report, Status
from gpuready.report.console import render_console
from gpuready.report.progress_line import (BenchProgress, ProgressLine, bench_plan, burn_plan, burn_progress,
                                           validate_plan, validate_progress)
from gpuready.report.translate import in_language
from gpuready.runner.local import RunOutcome
from gpuready.progress import Figure
from gpuready.runner.progress import Progress
from gpuready.runner.watchdog import RankFailure
from gpuready.telemetry import Telemetry
from gpuready.verbs.bench.data import _judge_dataloader, storage_throughput
from gpuready.verbs.bench.judge import BenchJudge
from gpuready.verbs.burn.judge import BurnGpu, BurnJudge
from gpuready.estimate.machine import Machine
from gpuready.verbs.plan.run import PlanOptions, run_plan
from gpuready.devices import blame_sharing, sharing_findings
from gpuready.measuring import stopped_finding
from gpuready.verbs.validate import build_report
from gpuready.model import Subject

DOMAINS = ("verbs_validate", "verbs_burn", "verbs_bench", "verbs_plan", "verbs_misc", "progress")
ENGLISH = re.compile(r"[A-Za-z][A-Za-z'-]+(?:[ /][A-Za-z][A-Za-z'-]+){2,}")
"""Three English words in a row: a sentence left untranslated (a name is one or two words)."""
NAMES = {"NVML event API", "SW power cap", "flash attention kernel", "NVIDIA H200", "pid 4242 (python"}


def english_left(text):
    """What reads as English prose in `text`, commands in backticks and paths aside."""
    return [hit for hit in ENGLISH.findall(re.sub(r"`[^`]*`|(?<!\w)/\S+", "", text)) if hit not in NAMES]


def chinese(finding):
    """(message, fix) of a finding as the Chinese console shows them."""
    translated = in_language({"findings": [finding.__dict__ | {"status": finding.status.value}]}, "zh")["findings"][0]
    return translated["message"], translated["fix"]


def assert_chinese(findings):
    for finding in findings:
        assert finding.message_id, (finding.check_id, finding.message)
        message, fix = chinese(finding)
        assert message != finding.message and re.search(r"[\u4e00-\u9fff]", message), message
        assert not english_left(message), (finding.check_id, message)
        if finding.fix is not None:
            assert fix != finding.fix and not english_left(fix), (finding.check_id, fix)


@pytest.mark.parametrize("domain", DOMAINS)
def test_the_chinese_catalogue_of_the_verbs_holds_no_english_sentence(domain):
    with open(LOCALE_DIR / "zh" / "LC_MESSAGES" / f"{domain}.po", "rb") as po_file:
        entries = [entry for entry in read_po(po_file) if entry.id]
    assert entries
    for entry in entries:
        assert not english_left(re.sub(r"\{[^}]*\}", "", entry.string)), (entry.id, entry.string)


# -- validate ---------------------------------------------------------------------------------------------------------

RESULTS = {int(rank): result for rank, result in
           json.loads((FIXTURES / "h200-validate" / "rank-results.json").read_text())["results"].items()}


def _validate(results, failures=()):
    facts = build_facts(read_bundle(FIXTURES / "h200-collect"))
    return build_report(RunOutcome(results=results, failures=list(failures)), facts, "h200")


def test_validate_findings_keep_their_english_and_read_in_chinese():
    results = copy.deepcopy(RESULTS)
    results[0]["workloads"]["compute"]["matmul"]["bf16"]["tflops"] = 300.0
    results[0]["workloads"]["collectives"]["rows"][3]["wrong"] = 5
    report = _validate(results, [RankFailure(rank=1, kind="hang", detail="advanced no step")])
    assert_chinese(f for f in report.findings if f.check_id != "validate.rank_hung")  # its detail is the watchdog's
    by_id = {}
    for finding in report.findings:
        by_id.setdefault(finding.check_id, finding)
    low = by_id["compute.low"]
    assert low.message == "bf16 matmul: 300.0 TFLOP/s, 38% of the 791.2 TFLOP/s expected."
    assert chinese(low) == ("bf16 matmul（矩阵乘）：300.0 TFLOP/s，为预期 791.2 TFLOP/s 的 38%。",
                            "检查负载下的时钟和降频原因（`gpuready burn`）、功耗上限（power.limit）和散热。")
    transfer = next(f for f in report.findings if f.check_id == "transfer.low")
    assert transfer.message.startswith("h2d pinned: ") and transfer.fix is None  # a pass has no next step
    assert chinese(transfer)[0].startswith("主机→设备拷贝（h2d，pinned 内存）：")
    assert by_id["nccl.failed"].message == ("Data check failed: 1 result(s) wrong, first all_reduce 64 B in_place with 5 "
                                            "wrong element(s).")
    assert by_id["validate.rank_hung"].message == "Rank 1 on h200 advanced no step; the run was stopped."
    assert chinese(by_id["validate.rank_hung"])[0] == "h200 上的 rank 1：advanced no step；运行已停止。"
    assert by_id["ddp.mismatch"].message.startswith("DDP on 1 rank(s): 3 steps, gradients equal the single-process")
    assert chinese(by_id["ddp.mismatch"])[0].endswith("各 rank 的参数逐位相同；FSDP2 的一步与 DDP 一致。")


def test_a_shared_gpu_is_blamed_in_either_language_and_the_fix_stays():
    results = copy.deepcopy(RESULTS)
    results[0]["workloads"]["compute"]["matmul"]["bf16"]["tflops"] = 300.0
    report = _validate(results)
    users = {0: GpuUsers(index=0, bus_id=RESULTS[0]["gpu"]["bus_id"], uuid=RESULTS[0]["gpu"]["uuid"],
                         processes=[{"pid": 2032, "name": "python3", "used_memory_bytes": 966367641}])}
    findings = sharing_findings("validate", "h200", users, exclusive=False) + report.findings
    blame_sharing(findings, users)
    low = next(f for f in findings if f.check_id == "compute.low" and f.status != Status.PASS)
    assert low.message == ("bf16 matmul: 300.0 TFLOP/s, 38% of the 791.2 TFLOP/s expected. Another process shares this "
                           "GPU (pid 2032 (python3) holding 0.9 GiB): the likely cause.")
    assert low.fix.startswith("Check clocks and throttle reasons under load")
    assert chinese(low) == ("bf16 matmul（矩阵乘）：300.0 TFLOP/s，为预期 791.2 TFLOP/s 的 38%。另一个进程在共享这块 GPU"
                            "（pid 2032（python3）占用 0.9 GiB）：很可能是原因所在。",
                            "检查负载下的时钟和降频原因（`gpuready burn`）、功耗上限（power.limit）和散热。")
    shared = findings[0]
    assert shared.message == ("GPU 0 is shared with another process: pid 2032 (python3) holding 0.9 GiB. Its figures "
                              "are not this GPU's alone: low throughput, power or clocks are likely that process's.")
    assert_chinese([shared, low, *sharing_findings("burn", "h", None, False), *sharing_findings("burn", "h", {}, False)])
    refused = sharing_findings("burn", "h", users, exclusive=True, ran=False)[0]
    assert refused.message.endswith("--exclusive: nothing was started.") and "已指定 --exclusive" in chinese(refused)[0]


def test_a_stopped_run_says_so_in_chinese():
    finding = stopped_finding("bench", "h", "SIGINT", 12.4)
    assert finding.message == ("Stopped by Ctrl-C (SIGINT) after 12 s: the figures and findings cover only the part "
                               "that ran.")
    assert chinese(finding) == ("运行在 12 s 后被 Ctrl-C（SIGINT） 停止：这些数据和结论只覆盖已运行的部分。",
                                "重新运行 `gpuready bench` 直到结束（在调度系统下：时间上限要高于这次运行的截止时间）。")
    assert stopped_finding("burn", "h", "SIGUSR1", 3).message.startswith("Stopped by SIGUSR1 after 3 s")


# -- burn -------------------------------------------------------------------------------------------------------------

def _sample(t, temperature=60, clock=1755, reasons=REASON_BITS["sw_power_cap"], ecc=(0, 0)):
    return (t, {"power_w": 690.0, "power_limit_w": 700.0, "temperature_c": temperature, "sm_clock_mhz": clock,
                "clock_event_reasons": reasons, "ecc_corrected": ecc[0], "ecc_uncorrected": ecc[1]})


def _burn_gpu(rank=0, tflops=656.0, errors=(), memory_wrong=0):
    result = {"iterations": 12000, "dtype": "bf16", "n": 8192, "errors": list(errors), "tolerance_abs": 5.0,
              "reference_checksum": 1.5, "tflops": tflops, "window_start": 1002.0, "window_end": 1059.0,
              "intervals": [], "memory": {"bytes": 2**33, "wrong_words": memory_wrong, "free_bytes_at_start": 150 * 2**30,
                                          "sizing": "15% of the memory free at start, at most 8 GiB"}}
    return BurnGpu(rank=rank, nvml_index=rank, identity={"bus_id": f"0000:0{rank}:00.0", "uuid": f"GPU-{rank}",
                                                         "name": "NVIDIA H200"},
                   result=result, slowdown_c=89.0, power_default_limit_w=700.0)


def test_burn_findings_keep_their_english_and_read_in_chinese():
    thermal = REASON_BITS["hw_thermal_slowdown"]
    hot = [_sample(t, temperature=80 + t // 10, clock=1755 if t < 30 else 1300,
                   reasons=thermal if t >= 30 else REASON_BITS["sw_power_cap"], ecc=(0, 0 if t < 20 else 2))
           for t in range(60)]
    telemetry = Telemetry(started_at=1000.0, samples={0: hot, 1: [_sample(t) for t in range(60)]},
                          xid_source="NVML event API")
    telemetry.xid_events = [(30.0, 0, 13)]
    broken = _burn_gpu(errors=[{"iteration": 60, "elements": 1, "max_abs_error": 21.0}], memory_wrong=3)
    judge = BurnJudge("h200", [broken, _burn_gpu(1, tflops=400.0)], telemetry, [], users={})
    judge.judge()
    assert_chinese(judge.findings)
    first = {(f.check_id, f.subject.rank): f for f in reversed(judge.findings)}
    errors = first[("burn.errors", 0)]
    assert errors.message == ("Silent errors on GPU0 rank 0: 1 checked product(s) wrong, first at GEMM 60 with 1 "
                              "element(s) off by up to 21 (tolerance 5); 3 memory word(s) read back wrong.")
    assert chinese(errors)[0] == ("GPU0 rank 0 上出现静默错误：1 个被校验的乘积错误，第一个在第 60 次 GEMM，1 个元素偏差最大 21"
                                  "（容差 5）；3 个显存字读回错误。")
    clean = first[("burn.errors", 1)]
    assert clean.message == ("12,000 bf16 GEMMs (8192³) matched the reference; memory pattern over 8.0 GiB read back "
                             "intact (15% of the memory free at start, at most 8 GiB: 150.0 GiB free).")
    assert "（开始时空闲显存的 15%，最多 8 GiB：空闲 150.0 GiB）" in chinese(clean)[0]
    throughput = first[("burn.throughput_low", 1)]
    assert throughput.message == "400.0 bf16 TFLOP/s sustained, 61% of the 652.7 expected (989.0 dense × 0.66 sustained)."
    assert chinese(throughput)[0] == "持续 400.0 bf16 TFLOP/s，为预期 652.7 的 61%（989.0 稠密峰值 × 0.66 持续效率）。"
    assert first[("burn.temperature", 0)].message == ("Peak 85 °C under full load: came within 5 °C of its slowdown "
                                                      "temperature or above 90 °C.")
    assert first[("burn.power", 1)].message.endswith("the load is as heavy as the limit allows")
    xid = first[("burn.xid", 0)]
    assert xid.message.startswith("Xid 13 ROBUST_CHANNEL_GR_EXCEPTION at 30 s into the burn: ")
    assert xid.message.endswith(" The application here is gpuready's own GEMM loop: if it repeats on this GPU only, "
                                "treat it as the GPU's.")
    assert chinese(xid)[0].startswith("burn 开始后 30 s 出现 Xid 13 ")


def test_a_burn_worker_out_of_memory_names_the_holders_in_chinese():
    gpu = _burn_gpu()
    gpu.result = {"error": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB"}
    users = {0: GpuUsers(index=0, bus_id="0000:00:00.0", uuid="GPU-0",
                         processes=[{"pid": 3100, "name": "python3", "used_memory_bytes": 130 * 2**30}])}
    judge = BurnJudge("h200", [gpu], None, [RankFailure(rank=0, kind="workload", detail="its workload raised")],
                      users=users)
    judge.judge()
    failed = next(f for f in judge.findings if f.check_id == "burn.failed")
    assert failed.message == ("The burn worker stopped: CUDA ran out of memory (torch.OutOfMemoryError: CUDA out of "
                              "memory. Tried to allocate 8.00 GiB). Other processes hold memory on this GPU: pid 3100 "
                              "(python3) holding 130.0 GiB.")
    assert chinese(failed) == ("burn worker 已停止：CUDA 显存不足（torch.OutOfMemoryError: CUDA out of memory. Tried to "
                               "allocate 8.00 GiB）。其他进程占用着这块 GPU 的显存：pid 3100（python3）占用 130.0 GiB。",
                               "释放这块 GPU（用 `nvidia-smi` 查看谁占用了显存）后重新运行。")


# -- bench ------------------------------------------------------------------------------------------------------------

NVSWITCH = Machine(gpu_name="H100 SXM", gpus_per_node=8, nvlink_domain=8, peak_tflops={"bf16": 989.0},
                   memory_bytes_per_gpu=80_000_000_000)


def _bench_run(strategy, world_size, tokens_per_s, telemetry=None, reserved=60_000_000_000):
    result = {"strategy": strategy, "world_size": world_size, "precision": "bf16", "seq": 2500, "micro_batch": 4,
              "accumulation": 1, "tokens_per_step": 10_000 * world_size, "parameters": 8_000_000_000,
              "flops_per_token": 4.945e10, "step_times_s": [10_000 * world_size / tokens_per_s] * 5,
              "peak_allocated_bytes": reserved, "peak_reserved_bytes": reserved, "versions": {"torch": "2.11.0"}}
    return {"strategy": strategy, "world_size": world_size, "telemetry": telemetry,
            "results": {rank: dict(result) for rank in range(world_size)}}


def test_bench_findings_and_decision_keep_their_english_and_read_in_chinese():
    throttled = {"throttle_share": 0.12, "reasons": ["sw_thermal_slowdown"], "power_w_median": 612.0,
                 "temp_c_max": 88.0, "sm_clock_mhz_median": 1410.0}
    users = {0: GpuUsers(index=0, bus_id="0000:18:00.0", uuid="GPU-a",
                         processes=[{"pid": 4242, "name": "python", "used_memory_bytes": 8 * 2**30}])}
    judge = BenchJudge("node1", [_bench_run("single", 1, 10_000), _bench_run("ddp", 8, 40_000, throttled)],
                       machine=NVSWITCH, users=users)
    judge.judge()
    assert_chinese(judge.findings)
    scaling = next(f for f in judge.findings if f.check_id == "bench.scaling_low")
    assert scaling.message == (
        "ddp on 8 GPUs: 40,000 tokens/s vs 10,000 on one GPU, scaling efficiency 0.50 (below the 0.90 expected every "
        "GPU on NVLink/NVSwitch); exposed communication 1,000.0 ms (50% of the step). Another process shares GPU 0 "
        "(pid 4242 (python) holding 8.0 GiB): the likely cause.")
    assert chinese(scaling)[0] == (
        "ddp，8 块 GPU：40,000 tokens/s，单 GPU 为 10,000，扩展效率 0.50（低于预期的 0.90，所有 GPU 都在 NVLink/NVSwitch 上）；"
        "暴露的通信时间 1,000.0 ms（占每步的 50%）。另一个进程在共享 GPU 0（pid 4242（python）占用 8.0 GiB）：很可能是原因所在。")
    assert chinese(scaling)[1].startswith("检查链路（`gpuready validate`：nccl.busbw_low、p2p.low；")
    decision = next(f for f in judge.findings if f.check_id == "bench.decision")
    assert decision.message == (
        "Fix communication first: ddp on 8 GPUs 40,000 tokens/s, scaling efficiency 0.50 (expected 0.90 every GPU on "
        "NVLink/NVSwitch); exposed communication 1,000.0 ms, 50% of each step. More GPUs over this every GPU on "
        "NVLink/NVSwitch path add less than they cost.")
    assert chinese(decision)[0].startswith("先解决通信问题：ddp，8 块 GPU：40,000 tokens/s，扩展效率 0.50")
    throttle = next(f for f in judge.findings if f.check_id == "bench.throttled" and f.status == Status.WARN)
    assert chinese(throttle)[0] == ("ddp，8 块 GPU：12% 的采样中时钟被降频（sw_thermal_slowdown）；功耗中位数 612 W；最高温度 "
                                    "88 °C；SM 时钟中位数 1410 MHz：这些数据低于 GPU 的实际能力。")


@pytest.mark.parametrize("runs, decision", [
    ([("single", 1, 10_000, 76_000_000_000)], "Shrink the step first: single on 1 GPU reserved 95% of GPU memory"),
    ([("single", 1, 10_000, 60_000_000_000)], "Measure next: a run on one GPU and on several to compare"),
    ([("single", 1, 10_000, 10_000_000_000), ("ddp", 8, 76_000, 10_000_000_000)], "Add GPUs: ddp on 8 GPUs"),
    ([("single", 1, 4_000, 10_000_000_000), ("ddp", 8, 31_000, 10_000_000_000)],
     "Measure next: the single-GPU step. Scaling is fine"),
])
def test_every_bench_decision_reads_in_chinese(runs, decision):
    judge = BenchJudge("node1", [_bench_run(s, n, rate, reserved=reserved) for s, n, rate, reserved in runs],
                       machine=NVSWITCH)
    judge.judge()
    assert_chinese(judge.findings)
    assert next(f for f in judge.findings if f.check_id == "bench.decision").message.startswith(decision)


def test_bench_data_findings_read_in_chinese(tmp_path):
    failed = _judge_dataloader(Subject(host="h"), 500.0, {0: 120.0, 2: 300.0}, [8], 2, [])
    assert failed.message == ("No worker count keeps up: the best DataLoader gave 300 samples/s, the GPUs consume 500 "
                              "samples/s. Worker counts 8 were not run (more than 2 × 2 CPUs).")
    assert chinese(failed)[0] == ("没有哪个 worker 数跟得上：最好的 DataLoader 为 300 samples/s，而 GPU 消耗 500 samples/s。"
                                  "worker 数 8 未运行（超过 2 × 2 个 CPU）。")
    passed = _judge_dataloader(Subject(host="h"), 100.0, {0: 120.0, 2: 300.0}, [], 2, [])
    assert passed.message == "num_workers=0 keeps up: 120 samples/s for 100 needed." and passed.fix is None
    (tmp_path / "shard").write_bytes(b"x" * 65536)
    _measurements, (storage,) = storage_throughput(tmp_path, needed_bytes_per_s=1e15, host="h", timeout_s=2)
    assert storage.message.startswith("Storage is too slow even for sequential reads: sequential ")
    empty = storage_throughput(tmp_path / "none", needed_bytes_per_s=None, host="h")[1][0]
    assert empty.message == f"Storage not measured: {tmp_path / 'none'} is not a readable folder."
    assert_chinese([failed, passed, storage, empty])


# -- plan -------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("options", [dict(preset="llama2-7b", machine="8xH200"),
                                     dict(preset="llama3-70b", machine="1xH100-SXM"),
                                     dict(preset="llama3-70b", machine="1xRTX-4090"),
                                     dict(preset="llama3-70b", task="infer", machine="8xH200")])
def test_plan_findings_read_in_chinese(options):
    report = run_plan(PlanOptions(**options))
    fits = [f for f in report.findings if f.check_id.startswith("plan.") and "fits" in f.check_id]
    assert fits
    assert_chinese(fits)


def test_plan_fit_keeps_its_english():
    def fits(machine):
        return next(f for f in run_plan(PlanOptions(preset="llama3-70b", machine=machine)).findings
                    if f.check_id == "plan.fits")
    none, one = fits("1xRTX-4090"), fits("1xH100-SXM")
    assert none.message == ("No strategy fits 1× RTX 4090 (22 GiB each): the smallest, fsdp+offload, needs 42.0 GiB "
                            "per GPU.")
    assert chinese(none)[0] == "没有任何策略能放进 1× RTX 4090（每块 22 GiB）：最小的 fsdp+offload 每块 GPU 需要 42.0 GiB。"
    assert one.message == ("1 of 3 strategies fit 1× H100 SXM; best: fsdp+offload at 42.0 GiB per GPU, about 23.13 s per "
                           "step (host transfer-bound).")
    assert chinese(one)[0].endswith("每步约 23.13 s（受限于主机传输）。")


def test_the_console_shows_a_run_verb_report_in_chinese():
    report = Report(tool_version="0", host="h200",
                    findings=[stopped_finding("validate", "h200", "SIGTERM", 9.0)] + _validate(RESULTS).findings)
    console = Console(record=True, width=200)
    render_console(report.to_dict(), console=console, lang="zh", verbose=True)
    text = console.export_text()
    assert "运行在 9 s 后被 SIGTERM 停止" in text and "主机→设备拷贝（h2d，pinned 内存）：" in text
    assert "expected." not in text and "Stopped by" not in text


# -- the progress line ------------------------------------------------------------------------------------------------

class Stream(io.StringIO):
    def isatty(self):
        return False


def _post(rank, phase, operation="", **typed):
    return Progress(rank=rank, phase=phase, operation=operation, sequence=1, host="h", pid=1, **typed)


def test_the_progress_line_speaks_the_readers_language():
    for lang, expected in (("en", ["gpuready validate: 2 rank(s) on cpu, workloads collectives, ddp (quick); "
                                   "predicted about 40 s", "validate: collectives 1/2, about 40 s left, all_reduce 8 B"]),
                           ("zh", ["gpuready validate：cpu 上 2 个 rank，工作负载 collectives, ddp（quick）；预计约 40 秒",
                                   "validate：集合通信（collectives） 1/2，约剩 40 秒，all_reduce 8 B"])):
        stream = Stream()
        line = ProgressLine("validate", validate_plan(2, "cpu", ["collectives", "ddp"], True, 40.0),
                            validate_progress(40.0, ["collectives", "ddp"]), stream=stream, lang=lang)
        status = line.describe({0: _post(0, "collectives", "all_reduce 8 B")}, 0.0)
        assert stream.getvalue().splitlines()[0] == expected[0]
        assert line.line(status, elapsed=False) == expected[1]


def test_bench_and_burn_progress_in_chinese():
    describe = BenchProgress([("single", 1), ("ddp", 2)], 5, lambda strategy, world_size: 100 * world_size)
    describe({0: _post(0, "train", step=0, warm_up=True)}, 1.0)
    status = describe({0: _post(0, "train", step=2)}, 2.0)
    assert (status.phase, status.rate, status.detail) == ("single×1 steps", "200 tokens/s", "run 1/2")
    line = ProgressLine("bench", bench_plan("tiny", 2, "cpu", [("single", 1), ("ddp", 2)], 1, 6), describe,
                        stream=Stream(), lang="zh")
    assert line.line(status, elapsed=False).startswith("bench：single×1 计时步 3/5，200 tokens/s，约剩 ")
    assert line.line(status, elapsed=False).endswith("，第 1/2 次运行")
    burn = burn_progress(60.0, 10.0, lambda: 7)
    gemm = burn({0: _post(0, "burn", figures=[Figure(value=2300, unit="gemms"), Figure(value=1290, unit="tflops")],
                          errors=2)}, 14.0)
    assert gemm.rate == "2,300 GEMMs, 1,290 TFLOP/s, 2 error(s), 7 telemetry samples"
    burn_line = ProgressLine("burn", burn_plan(1, "cpu", "fp32", 4), burn, stream=Stream(), lang="zh")
    assert burn_line.line(gemm, elapsed=False) == ("burn：GEMM 2/60 s，2,300 次 GEMM，1,290 TFLOP/s，2 个错误，7 个遥测采样，"
                                                   "约剩 58 秒，1 个 worker 在上报")


def test_the_plans_say_what_the_verbs_print_today():
    """The callers may pass these in place of their own f-strings: the English is the same."""
    assert validate_plan(2, "cpu", ["collectives", "ddp"], False, 40.2).english() == \
        "2 rank(s) on cpu, workloads collectives, ddp; predicted about 40 s"
    assert burn_plan(1, "cpu", "fp32", 4.0).english() == \
        "1 worker(s) on cpu, fp32 GEMMs for 4 s after a memory pattern"
    assert bench_plan("tiny", 2, "cpu", [("single", 1), ("ddp", 2)], 1, 6).english() == \
        "tiny on 2 cpu rank(s), runs single×1, ddp×2; 1 warm-up + 6 measured steps each"

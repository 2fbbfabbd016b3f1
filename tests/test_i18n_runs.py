"""What a run says while and after it runs, in the reader's language (issue 21): the watchdog's account of a failed
rank (nested in validate's, burn's and bench's findings), what a rank posts it is doing and the texts a worker sends
(by catalogue id, rendered by the parent), the verbs' usage errors (exit 2), the live progress line built by the
verbs, burn's telemetry table, and plan's power, cooling and cost on the console. The English stays as it was."""

import io
import json
import re

import pytest
from babel.messages.pofile import read_po

from conftest import FIXTURES
from gpuready.evidence.reader import read_bundle
from gpuready.cli.main import main
from gpuready.evidence.build import build_facts
from gpuready.facts.nvml_records import GpuIdentity, GpuSample
from gpuready.i18n import LOCALE_DIR, Sentence, message, said, said_of, sentence, text_in
from gpuready.report.labels import labels_for
from gpuready.report.translate import in_language
from gpuready.runner.local import RunOutcome
from gpuready.runner.progress import ProgressReporter, read_progress
from gpuready.runner.watchdog import Watchdog, state_text, where
from gpuready.verbs.bench.judge import BenchJudge
from gpuready.verbs.bench.run import BenchOptions, bench_progress, failure_entry, run_entry, states_do_not_fit
from gpuready.verbs.burn.judge import BurnGpu, BurnJudge
from gpuready.verbs.burn.run import _live_table
from gpuready.verbs.validate import build_report
from gpuready.shapes import PRESETS

DOMAINS = ("runner", "workloads", "cli_errors", "plan_console")
ENGLISH = re.compile(r"[A-Za-z][A-Za-z'-]+(?:[ /][A-Za-z][A-Za-z'-]+){2,}")
"""Three English words in a row: a sentence left untranslated (a name is one or two words)."""
NAMES = {"Goyal et al", "Malladi et al", "OOM killer"}
"""Names of papers' authors and of a kernel feature: they stay as they are in Chinese."""


def english_left(text):
    """What reads as English prose in `text`, commands in backticks and paths aside."""
    return [hit for hit in ENGLISH.findall(re.sub(r"`[^`]*`|(?<!\w)/\S+", "", text)) if hit not in NAMES]


def chinese(finding):
    """A finding's (message, fix) as the Chinese console shows them."""
    translated = in_language({"findings": [finding.__dict__ | {"status": finding.status.value}]}, "zh")["findings"][0]
    return translated["message"], translated["fix"]


def test_the_chinese_catalogue_of_runs_holds_no_english_sentence():
    texts = {}
    for domain in DOMAINS:
        with open(LOCALE_DIR / "zh" / "LC_MESSAGES" / f"{domain}.po", "rb") as po_file:
            texts.update((entry.id, entry.string) for entry in read_po(po_file) if entry.id)
    assert len(texts) > 200
    assert not {msg_id: text for msg_id, text in texts.items() if english_left(re.sub(r"\{[^}]*\}", "", text))}


# -- the watchdog, and what the ranks post -----------------------------------------------------------------------------

class Store:
    """The rendezvous store's few calls, in memory."""

    def __init__(self):
        self.values = {}

    def set(self, key, value):
        self.values[key] = value.encode() if isinstance(value, str) else value

    def get(self, key):
        return self.values[key]

    def check(self, keys):
        return all(key in self.values for key in keys)


class Process:
    def __init__(self, code):
        self.code, self.pid = code, 0

    def poll(self):
        return self.code


def _failed_rank():
    """Rank 1 posts `ddp` step 3 by catalogue id, then exits with 17: the watchdog's failure."""
    store = Store()
    ProgressReporter(store, 0, None, 10).post("ddp", said("op.ddp.step", step=3))
    ProgressReporter(store, 1, "0000:19:00.0", 11).post("ddp", said("op.ddp.step", step=3))
    dog = Watchdog(store, 2, startup_timeout_s=60, processes=[Process(None), Process(17)])
    assert dog.poll()
    return dog.failures[1]


def test_a_rank_posts_its_operation_by_id_and_the_reader_renders_it():
    store = Store()
    ProgressReporter(store, 0, None, 10).post("train", said("op.train.step.warm_up", strategy="ddp", step=2))
    post = read_progress(store, 1)[0]
    assert json.loads(store.get("gpuready/progress/0"))["operation"] == ""  # the rank sends the id, not the text
    assert isinstance(post.operation, Sentence) and post.operation == "ddp step 2 (warm-up)"
    assert message(post.operation.said.msg_id, "zh", **post.operation.said.values) == "ddp 第 2 步（预热）"
    ProgressReporter(store, 0, None, 10).post("startup", "init_process_group")  # a name stays as it was posted
    assert read_progress(store, 1)[0].operation == "init_process_group"


def test_a_rank_failure_keeps_its_english_and_reads_in_chinese_inside_validate():
    failure = _failed_rank()
    assert failure.kind == "exit"
    assert failure.detail == "exited with code 17; its last report: ddp: step 3 (operation #1, 0 s ago)"
    assert text_in("zh", failure.said.msg_id, failure.said.values) == \
        "以退出码 17 退出；最后一次报告：DDP：第 3 步（第 1 个操作，0 秒前）"
    facts = build_facts(read_bundle(FIXTURES / "h200-collect"))
    report = build_report(RunOutcome(results={}, failures=[failure]), facts, "h200")
    found = next(f for f in report.findings if f.check_id == "validate.rank_exited")
    assert failure.detail in found.message and found.observed == failure.detail
    zh_message, zh_fix = chinese(found)
    assert "以退出码 17 退出；最后一次报告：DDP：第 3 步（第 1 个操作，0 秒前）" in zh_message
    assert not english_left(zh_message) and not english_left(zh_fix), (zh_message, zh_fix)


def test_every_account_of_a_rank_renders_whole_in_chinese():
    texts = [where(None), state_text("stopped"), state_text("unheard-of"), state_text(None),
             said("runner.failure.no_word", seconds=21, where=where(None)),
             said("runner.failure.stalled", where=where(None), state=state_text("disk-sleep")),
             said("runner.failure.past_deadline", deadline_s=50, where=where(None), state=""),
             said("runner.failure.no_report", quiet=said("runner.failure.quiet", seconds=4), where=where(None))]
    english = [text.english() for text in texts]
    assert english[:4] == [" before reporting any progress", " (stopped)", " (unheard-of)", " (state unknown)"]
    assert english[5] == "stopped advancing before reporting any progress (disk-sleep)"
    assert english[7] == ("ended before writing the report; its heartbeat stopped 4 s before the run ended (torchrun's "
                          "output and the rank logs say why) before reporting any progress")
    for text in texts:
        rendered = message(text.msg_id, "zh", **text.values)
        assert not english_left(rendered), rendered
    assert message(texts[1].msg_id, "zh", **texts[1].values) == "（已暂停）"


def test_a_lost_gpu_in_burn_and_a_failed_bench_run_say_the_watchdog_in_chinese():
    failure = _failed_rank()
    gpu = BurnGpu(rank=1, nvml_index=1, identity={"bus_id": "0000:19:00.0"}, result=None)
    judge = BurnJudge("h200", [gpu], None, [failure])
    judge.judge()
    lost = next(f for f in judge.findings if f.check_id == "burn.gpu_lost")
    assert failure.detail in lost.message
    assert "以退出码 17 退出" in chinese(lost)[0] and not english_left(chinese(lost)[0])
    entry = failure_entry(failure)
    assert entry["detail"] == failure.detail and entry["detail_text"]["message_id"] == "runner.failure.exited"
    bench = BenchJudge("h200", [json.loads(json.dumps(run_entry("ddp", 2, {0: {"step_times_s": [1.0]}}, [failure])))])
    bench.judge()
    failed = next(f for f in bench.findings if f.check_id == "bench.run_failed")
    assert failure.detail in failed.message
    assert "以退出码 17 退出" in chinese(failed)[0] and not english_left(chinese(failed)[0]), chinese(failed)


def test_a_worker_skip_reason_and_a_run_too_big_read_in_chinese():
    too_big = states_do_not_fit(BenchOptions(), PRESETS["llama3-8b"], "single", 1, 24 * 2**30, "cuda")
    assert too_big["skipped"] == ("its model states alone (weights, gradients and AdamW state of 8,030,261,248 "
                                  "parameters in amp-bf16) need 120 GiB per GPU, more than the 24 GiB there")
    judge = BenchJudge("h200", [{"strategy": "single", "world_size": 1, "telemetry": None, "results": {0: too_big}}])
    judge.judge()
    skipped = next(f for f in judge.findings if f.check_id == "bench.run_failed")
    assert skipped.message == f"single on 1 GPU was not run: {too_big['skipped']}."
    zh_message = chinese(skipped)[0]
    assert "仅模型状态（8,030,261,248 个参数在 amp-bf16 下的权重、梯度和 AdamW 状态）每块 GPU 就需要 120 GiB" in zh_message
    assert not english_left(zh_message), zh_message


# -- usage errors ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, english, chinese_text", [
    (["validate", "--only", "foo"],
     "--only: unknown workload(s) foo; choose from compute, transfer, p2p, collectives, ddp",
     "--only：未知的 workload foo；可选 compute, transfer, p2p, collectives, ddp"),
    (["plan", "--preset", "gpt2-small", "--machine", "4xFOO"], None, "--machine '4xFOO'：gpuready 的表中没有与 'FOO' 匹配的 GPU"),
    (["plan", "--preset", "gpt2-small", "--machine", "4xRTX4090", "--validate-report", "/dev/null"],
     "--validate-report /dev/null is not a regular file (a device)", "--validate-report /dev/null 不是普通文件（一个设备文件）"),
    (["burn", "--duration", "5x"], "--duration: '5x' is not a duration like 30m, 90s or 1h",
     "--duration：'5x' 不是 30m、90s 或 1h 这样的时长"),
    (["bench", "--nnodes", "2"], "--nnodes needs --rdzv-endpoint HOST:PORT (the same on every node)",
     "--nnodes 需要 --rdzv-endpoint HOST:PORT（每个节点上相同）"),
])
def test_a_usage_error_is_one_sentence_in_either_language_with_exit_2(capsys, tmp_path, argv, english, chinese_text):
    assert main([*argv, "--lang", "en"]) == 2
    said_english = capsys.readouterr().err.strip()
    assert said_english.startswith("gpuready: ") and "\n" not in said_english
    if english is not None:
        assert said_english == f"gpuready: {english}"
    assert main([*argv, "--lang", "zh"]) == 2
    said_chinese = capsys.readouterr().err.strip()
    assert said_chinese.startswith(f"gpuready: {chinese_text}"), said_chinese
    assert not english_left(said_chinese), said_chinese


def test_an_out_folder_and_a_launch_without_image_in_chinese(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("GPUREADY_LANG", "zh")
    assert main(["plan", "--preset", "gpt2-small", "--machine", "1xH100-SXM", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"gpuready: --out {tmp_path} 是一个文件夹；请给出文件名"
    assert main(["launch", "k8s", "--nproc-per-node", "8", "--", "train.py"]) == 2
    assert capsys.readouterr().err.strip() == "gpuready: launch k8s 需要 --image（包含 PyTorch 和你的代码的容器镜像）"


def test_an_error_raised_again_keeps_its_catalogue_text():
    error = ValueError(sentence("error.cuda.none"))
    assert str(error) == "--device cuda: torch sees no CUDA GPU"
    assert message(said_of(error).msg_id, "zh") == "--device cuda：torch 看不到 CUDA GPU"
    plain = ValueError("a text of Python's own")
    assert said_of(plain) is plain


# -- the live display --------------------------------------------------------------------------------------------------

class Stream(io.StringIO):
    def isatty(self):
        return False


def test_bench_builds_its_progress_line_in_the_readers_language(capsys):
    plan = [("single", 1), ("ddp", 2)]
    for lang, expected in (("en", "gpuready bench: tiny on 2 cpu rank(s), runs single×1, ddp×2; 1 warm-up + 6 measured "
                                  "steps each"),
                           ("zh", "gpuready bench：tiny，cpu 上 2 个 rank，运行 single×1, ddp×2；每次 1 步预热 + 6 步计时")):
        line = bench_progress(BenchOptions(warmup_steps=1, steps=6, lang=lang), PRESETS["tiny"], "cpu", plan)
        line.close()
        assert capsys.readouterr().err.splitlines()[0] == expected


def test_the_rank_operation_reads_in_chinese_on_the_progress_line():
    from gpuready.report.progress_line import ProgressLine, validate_plan, validate_progress
    store = Store()
    ProgressReporter(store, 0, None, 10).post("ddp", said("op.ddp.first_step"))
    posts = read_progress(store, 1)
    for lang, expected in (("en", "validate: ddp 1/1, about 40 s left, step 0: forward, backward, gradient all-reduce"),
                           ("zh", "validate：DDP 1/1，约剩 40 秒，第 0 步：前向、反向、梯度 all-reduce")):
        line = ProgressLine("validate", validate_plan(1, "cpu", ["ddp"], False, 40.0),
                            validate_progress(40.0, ["ddp"]), stream=Stream(), lang=lang)
        assert line.line(line.describe(posts, 0.0), elapsed=False) == expected


def test_burns_telemetry_table_has_its_words_in_chinese():
    from rich.console import Console

    class Sampler:
        class telemetry:
            samples = {0: [(0.0, GpuSample(power_w=650.0, temperature_c=61, sm_clock_mhz=1980))]}

    store = Store()
    ProgressReporter(store, 0, None, 10).post("burn", said("op.burn.memory"))
    for lang, words in (("en", ["GPU", "status", "power", "temp", "SM clock", "reasons",
                                "memory pattern write/verify"]),
                        ("zh", ["GPU", "状态", "功率", "温度", "SM 频率", "降频原因", "显存模式写入/校验"])):
        stream = io.StringIO()
        Console(file=stream, width=200, color_system=None).print(
            _live_table([GpuIdentity(index=0, name="NVIDIA H200")], [0], Sampler, read_progress(store, 1), lang))
        assert all(word in stream.getvalue() for word in words), stream.getvalue()
        assert "650 W" in stream.getvalue()


# -- plan on the console -----------------------------------------------------------------------------------------------

def _plan_console(capsys, lang, *extra):
    """plan's console in `lang`; in Chinese without the English half of the bilingual labels (`电源与散热 power and
    cooling`), which are meant to stay."""
    assert main(["plan", "--preset", "gpt2-small", "--machine", "4xRTX4090", "--room-c", "26", "--known-batch", "100",
                 "--known-lr", "1e-3", "--known-gpus", "3", "--micro-batch", "7", "--optimizer", "sgd", "--verbose",
                 "--lang", lang, *extra]) in (0, 1)
    text = capsys.readouterr().out
    if lang != "en":
        for label in sorted((value for value in labels_for("en").values() if isinstance(value, str)), key=len,
                            reverse=True):
            text = text.replace(f" {label}", "") if len(label) > 3 and "{" not in label else text
    return text


def test_plan_power_cooling_and_cost_read_in_chinese(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "10000")  # one paragraph a line
    english = _plan_console(capsys, "en")
    assert ("Full load ≈ 2,750 W (4 x 450 W GPUs + 350 W CPUs (1 socket(s) x 350 W, assumed) + 600 W platform (base + "
            "per-GPU allowance for fans, switches, NICs; assumed)): size the PSU(s) at >= 3,575 W (1.3x full load, "
            "without redundancy).") in english
    assert "fix: Use blower-style or water-cooled cards" in english and "cool the room to <= 25 °C." in english
    assert "At 60% utilisation over 36 months: buy $" in english
    text = _plan_console(capsys, "zh")
    power = text[text.index("电源与散热"):]
    for paragraph in power.splitlines() + [line for line in text.splitlines() if "plan.cooling" in line
                                            or line.startswith(("  散热", "  修复"))]:
        assert not english_left(paragraph), paragraph
    assert "满载 ≈ 2,750 W（4 x 450 W GPU + 350 W CPU（1 个 CPU 插槽 x 350 W，假设值）" in power
    assert "按 60% 的利用率、36 个月计，每月：购买 $" in power
    assert "电价 $0.15/kWh（默认值（假设值，截至 " in power
    assert "机器 machine：4× RTX 4090，每块 GPU 22.4 GiB（描述 4xRTX4090）" in text
    why = text[text.index("原因 why"):text.index("批大小与学习率")]
    assert re.search(r"ddp: 放得下：每块 GPU 用 \d+\.\d GiB，共 22\.4 GiB；计算速度按 bf16 峰值 165\.2 TFLOP/s 的 80%"
                     r"（假设值；没有实测数据）；假设计算与通信不重叠", why)  # the memory figure is plan_memory's
    assert not english_left(why), why
    batch = text[text.index("批大小与学习率"):text.index("电源与散热")]
    assert not english_left(batch), batch

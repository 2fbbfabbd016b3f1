"""The Markdown summary (issue 22): recorded documents give exactly these lines (verdict and machine, problems worst
first with their fix, one fault on several GPUs as one item, key figures, passes per category), in the chosen
language; a log line in a message cannot format, link, inject HTML or break a table."""

import json

import pytest

from conftest import FIXTURES, PUBLIC
from gpuready.evidence.reader import read_bundle
from gpuready.checks.registry import CheckOptions
from gpuready.report.markdown import code, inline, markdown_summary
from gpuready.pipeline import check_files

H200_SUMMARY = """\
## gpuready check: vm

**READY WITH WARNINGS** (single node: READY WITH WARNINGS; multi node: READY WITH WARNINGS; verdict judged for: \
single node)

0 fail, 1 warn, 47 pass, 12 skip

### Problems

- **WARN** `host.memory_ratio`

  System RAM is 0.90× the total GPU memory, below the 1.5× rule of thumb: checkpoint loading, pinned-memory data \
loaders and CPU offload may run out of host memory.

  **fix:** Add system memory (or raise the container's memory limit) to at least 211 GiB; until then keep DataLoader \
workers and pinned buffers small, and avoid CPU offload (ZeRO-Offload / FSDP CPU offload).

  **remediation:** restart the job

### Passed

- gpu: 10 passed
- ddp: 1 passed
- nvlink: 2 passed
- health: 8 passed
- host: 5 passed
- network: 3 passed
- pcie: 5 passed
- power: 3 passed
- thermal: 1 passed
- software: 6 passed
- topology: 3 passed

12 check(s) skipped for lack of facts.
"""
"""The recorded H200 bundle: 45 passes in 11 categories (the console's `… passed` lines), the RAM warning, 3 skips."""


def check_document(folder):
    return check_files(read_bundle(folder), CheckOptions())[0].to_dict()


def recorded(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


@pytest.fixture(scope="module")
def dgx():
    return check_document(PUBLIC / "dgx-h100-nvswitch")


def test_the_h200_bundle_summary_line_by_line():
    assert markdown_summary([check_document(FIXTURES / "h200-collect")]) == H200_SUMMARY


def test_one_fault_on_eight_gpus_is_one_item_with_every_bus_id(dgx):
    """The DGX files: power.brake on machine 2's eight GPUs is one item (as on the console), before the warning."""
    lines = markdown_summary([dgx]).splitlines()
    start = lines.index("### Problems")
    assert lines[start:start + 18] == [
        "### Problems", "",
        "- **FAIL** `power.brake` GPU 0–7 (8 GPUs), machine 2 (driver 535.161.08)", "",
        "  GPU 0–7's clocks are cut by the HW power brake (HW Slowdown: power brake, not thermal): the chassis is "
        "braking the GPU. Check PSU redundancy and the BMC power policy.", "",
        "  bus ids: 0000:19:00.0, 0000:3b:00.0, 0000:4c:00.0, 0000:5d:00.0, 0000:9b:00.0, 0000:bb:00.0, "
        "0000:cb:00.0, 0000:db:00.0", "",
        "  **fix:** Check that every PSU is present, powered and healthy (`ipmitool sdr type 'Power Supply'`, the BMC "
        "event log), the BMC/chassis power-capping policy, and the GPU power cables; then confirm with "
        "`nvidia-smi -q -d PERFORMANCE` (HW Power Brake Slowdown: Not Active).", "",
        "  **remediation:** drain the node and service or replace the hardware", "",  # remediation.toml power.brake
        "- **WARN** `bundle.mixed_machines` machine 1 (driver 550.90.07)", "",
        "  These files come from 4 machines (different host names or NVIDIA drivers), judged one by one, not as one "
        "machine: machine 1 (driver 550.90.07): nvidia-smi-550.90.07.txt; machine 2 (driver 535.161.08): "
        "nvidia-smi-q-535.161.08.txt; machine 3 (driver 565.57.01): nvidia-smi-q.txt, nvidia-smi.txt; machine 4 "
        "(files that name no host or driver): nvidia-smi-topo-nics.txt, nvidia-smi-topo.txt.", "",
        "  **fix:** Give one machine's files at a time (`gpuready collect` on each node), or name the node each file "
        "came from.", ""]
    assert lines[:5] == ["## gpuready check: 4 machines", "",
                         "**NOT READY** (single node: NOT READY; multi node: NOT READY; verdict judged for: single "
                         "node)",
                         "", "8 fail, 1 warn, 62 pass, 184 skip"]


def test_the_key_figures_of_a_recorded_validate():
    """validate stopped by SIGTERM (recorded on the H200): six figures against their expected values, worked out from
    the document: 806.5 / 791.2 = 102 %, 4,269.7 / 4,272.0 = 100 %."""
    lines = markdown_summary([recorded("h200-shared-gpu/validate-sigterm.json")]).splitlines()
    start = lines.index("### Key figures")
    assert lines[start + 2:start + 10] == [
        "| measurement | subject | value | expected | of expected |",
        "|---|---|---:|---:|---:|",
        "| `matmul_tflops_bf16` | GPU0 rank 0 | 806.5 TFLOP/s | 791.2 | 102% |",
        "| `matmul_tflops_fp16` | GPU0 rank 0 | 779.5 TFLOP/s | 741.8 | 105% |",
        "| `matmul_tflops_tf32` | GPU0 rank 0 | 413.9 TFLOP/s | 346.1 | 120% |",
        "| `matmul_tflops_fp32` | GPU0 rank 0 | 50.8 TFLOP/s | 50.9 | 100% |",
        "| `matmul_tflops_fp8` | GPU0 rank 0 | 1,483.4 TFLOP/s | 1,444.7 | 103% |",
        "| `memory_copy_gb_per_s` | GPU0 rank 0 | 4,269.7 GB/s | 4,272.0 | 100% |"]
    assert lines[start - 8:start - 1] == [
        "### Problems", "", "- **WARN** `validate.interrupted`", "",
        "  Stopped by SIGTERM after 9 s: the figures and findings cover only the part that ran.", "",
        "  **fix:** Run `gpuready validate` again to its end (under a scheduler: a time limit above the run's "
        "deadline)."]


def test_latency_figures_are_listed_when_verbose():
    """The recorded validate under a foreign process: 15 figures, 5 of them latencies (one per collective)."""
    document = recorded("h200-shared-gpu/validate-foreign-loop.json")
    rows = [line for line in markdown_summary([document]).splitlines() if line.startswith("| `")]
    verbose = [line for line in markdown_summary([document], verbose=True).splitlines() if line.startswith("| `")]
    assert (len(rows), len(verbose)) == (10, 15)
    assert verbose[10] == "| `all_reduce_latency_us` | vm | 35.9 us | - |  |"


def test_an_older_burn_document_without_judged_for():
    """The recorded 60-s burn predates `judged_for`: said as not in this report, as the console says it."""
    assert markdown_summary([recorded("h200-burn/burn-60s-report.json")]).splitlines()[:12] == [
        "## gpuready burn: vm", "",
        "**READY** (single node: READY; multi node: READY; verdict judged for: not in this report)", "",
        "0 fail, 0 warn, 8 pass, 0 skip", "", "### Key figures", "",
        "| measurement | subject | value | expected | of expected |", "|---|---|---:|---:|---:|",
        "| `burn_tflops_bf16` | GPU0 rank 0 | 664.9 TFLOP/s | - |  |",
        "| `burn_power_w` | GPU0 rank 0 | 691.4 watts | 700.0 | 99% |"]


def test_in_chinese_labels_and_catalogued_messages_are_translated():
    """--lang zh: headings and labels from the catalogue; a catalogued finding (the H200 bundle's RAM warning) in
    Chinese, a message the recorded burn wrote before it had a catalogue id in its English (as on the console)."""
    lines = markdown_summary([recorded("h200-shared-gpu/burn-foreign-loop.json")], lang="zh").splitlines()
    assert lines[:5] == ["## gpuready burn：vm", "",
                         "**未就绪 NOT READY** (单机 single node: 未就绪 NOT READY; 多机 multi node: 未就绪 NOT READY; "
                         "结论依据 verdict judged for: 单机 single node)", "", "失败 1，警告 1，通过 8，跳过 0"]
    assert "### 问题" in lines and "### 关键数据" in lines and "### 通过" in lines and lines[-1] == "- 烤机 burn：8 项通过"
    assert "| 测量 measurement | 对象 subject | 数值 value | 预期 expected | 占预期 of expected |" in lines
    assert "- **失败 FAIL** `burn.throughput_low` GPU0 0000:00:06.0 rank 0" in lines
    assert "  **修复 fix:** Stop the other process or pick free GPUs with --gpus; --exclusive refuses shared GPUs." \
        in lines
    h200 = markdown_summary([check_document(FIXTURES / "h200-collect")], lang="zh").splitlines()
    assert h200[:10] == ["## gpuready check：vm", "",
                         "**就绪但有警告 READY WITH WARNINGS** (单机 single node: 就绪但有警告 READY WITH WARNINGS; "
                         "多机 multi node: 就绪但有警告 READY WITH WARNINGS; 结论依据 verdict judged for: 单机 single node)",
                         "", "失败 0，警告 1，通过 47，跳过 12", "", "### 问题", "", "- **警告 WARN** `host.memory_ratio`", ""]
    assert h200[10].startswith("  系统内存") and h200[12].startswith("  **修复 fix:** 增加系统内存")
    assert h200[-3:] == ["- 拓扑 topology：3 项通过", "", "12 项检查因缺少信息而跳过。"]


def test_a_hostile_message_is_shown_literally():
    """Markup, HTML, a list and a heading inside a message are escaped; code spans stay code; a table cell keeps to
    one line with its `|` escaped, inside code too; a fence longer than the quoted line's backticks."""
    document = {"verdict": "not_ready", "host": "evil|host", "exit_code": 1, "findings": [
        {"check_id": "x.y", "status": "fail", "subject": {"host": "evil|host"},
         "message": "<img src=x onerror=alert(1)> *b* _i_ [l](u) | `a | b` &amp;\n# h\n- item\n    deep\n1. one",
         "fix": "run `a|b` then ``` open", "evidence": [{"file": "log", "line": 3, "text": "```x``` \x1b[31m"}]}],
        "measurements": [{"name": "a|b`c", "subject": {"host": "h|x"}, "value": 1.5, "unit": "gb_per_s",
                          "expected": 2}]}
    lines = markdown_summary([document]).splitlines()
    assert lines[0] == r"## gpuready report: evil\|host"
    start = lines.index("- **FAIL** `x.y`")
    assert lines[start + 2:start + 17] == [
        r"  \<img src=x onerror=alert(1)\> \*b\* \_i\_ \[l\](u) \| `a | b` \&amp;",
        r"  \# h", r"  \- item", "  deep", r"  1\. one", "",
        "  ````", "  log:3: ```x``` \\x1b[31m", "  ````", "",
        r"  **fix:** run `a|b` then \`\`\` open", "", "### Key figures", "",
        "| measurement | subject | value | expected | of expected |"]
    assert lines[start + 18] == r"| ``a\|b`c`` | h\|x | 1.5 GB/s | 2.0 | 75% |"


@pytest.mark.parametrize("text, shown", [
    ("315.5 TFLOP/s", "315.5 TFLOP/s"),  # a figure opening a line is no list
    ("3. third", r"3\. third"), ("2) second", r"2\) second"), ("+ plus", r"\+ plus"), ("===", r"\==="),
    ("#tag", "#tag"), ("## h", r"\## h"), ("x\n---", "x\n\\---"), ("~~gone~~", r"\~\~gone\~\~"),
    ("a ``b` c", r"a \``b` c"),  # an unmatched run of backticks is text; the span after it is code
])
def test_inline_escapes(text, shown):
    assert inline(text) == shown


def test_code_spans_hold_backticks_and_pipes():
    assert (code("a`b"), code("`x"), code("a|b", cell=True)) == ("``a`b``", "`` `x ``", r"`a\|b`")


def test_a_plan_is_no_verdict_and_a_diagnosis_keeps_its_causes_first():
    """plan judges no machine: its title instead of a verdict. diagnose ties a consequence to its cause: that order
    is kept (not worst first), the consequence marked."""
    plan = markdown_summary([{"facts": {"plan": {}}, "host": "h", "findings": []}]).splitlines()
    assert plan[:5] == ["## gpuready plan: h", "", "**plan (an estimate, not a verdict on a machine)**", "",
                        "0 fail, 0 warn, 0 pass, 0 skip"]
    diagnosis = {"host": "h", "verdict": "not_ready", "facts": {"diagnose": {}}, "findings": [
        {"check_id": "nccl.wrong_interface", "status": "warn", "message": "lo", "subject": {"host": "h"}},
        {"check_id": "network.unreachable", "status": "fail", "message": "refused", "subject": {"host": "h"},
         "consequence_of": "nccl.wrong_interface"}]}
    lines = markdown_summary([diagnosis]).splitlines()
    assert lines[lines.index("### Problems"):] == [
        "### Problems", "", "- **WARN** `nccl.wrong_interface`", "", "  lo", "",
        "- **FAIL** `network.unreachable`", "", r"  ↳ consequence of nccl.wrong\_interface: refused"]


def plan_document(*argv: str) -> dict:
    from gpuready.cli import main as cli
    import contextlib
    import io
    with contextlib.redirect_stdout(io.StringIO()) as out:
        cli.main(["plan", *argv, "--json"])
    return json.loads(out.getvalue())


def test_a_plan_keeps_its_strategies_and_the_chosen_one():
    """Llama-2 7B (6.7 B parameters) on one 80 GB H100: plain single-GPU training with AdamW holds ~16 bytes per
    parameter (~107 GB before activations), so `single` is listed and does not fit; a strategy that fits is chosen.
    The table has the console's rows in the console's order."""
    document = plan_document("--preset", "llama2-7b", "--machine", "1xH100-SXM")
    summary = markdown_summary([document], "en")
    lines = summary.splitlines()
    header = lines.index("| strategy | fits | GiB per GPU | step s | bottleneck |")
    assert lines[header - 2] == "### strategies (best first), memory per GPU in GiB, bandwidth in GB/s" and lines[header + 1] == "|---|---|---:|---:|---|"
    rows = [line.split(" | ")[0].removeprefix("| ") for line in lines[header + 2:] if line.startswith("| ")]
    assert rows == [strategy["name"] for strategy in document["strategies"][:len(rows)]]
    single = next(line for line in lines if line.startswith("| single |"))
    assert single.split(" | ")[1] == "no" and float(single.split(" | ")[2]) > 100  # GiB per GPU
    chosen = next(strategy for strategy in document["strategies"] if strategy["fits"])
    assert f"**chosen: {chosen['name']}, " in summary
    chinese = markdown_summary([document], "zh")
    assert single.replace("| single | no |", "| single | 否 no |").replace("memory |", "显存 |") in chinese
    assert "| 策略 strategy | 放得下 fits |" in chinese


def test_plan_cells_cannot_break_the_table():
    document = {"facts": {"plan": {}}, "findings": [], "strategies": [
        {"name": "a|b\nc", "fits": ["not", "a", "bool"], "memory_bytes": {"total": "x"}, "step_time_s": None,
         "bottleneck": "<script>"}]}
    lines = markdown_summary([document], "en").splitlines()
    [row] = [line for line in lines if line.startswith("| a")]
    assert row == r"| a\|b c | ? | ? | - | \<script\> |"

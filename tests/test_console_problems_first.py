"""The console shows problems first and cuts nothing: recorded bundles rendered at 80 columns, piped and on a terminal.

A fault on several GPUs is one row naming them; every bus id and every failure or warning message of the JSON appears
whole; passes are one line per category; piped output has no box-drawing characters."""

import copy
import io
import json
import re
from collections import Counter

import pytest
from rich.cells import cell_len
from rich.console import Console

from conftest import FIXTURES, PUBLIC
from gpuready.checks.registry import CheckOptions
from gpuready.report.console import render_console
from gpuready.report.document import Gpu
from gpuready.report.gpu_groups import gpu_list_label
from gpuready.evidence.reader import read_bundle
from gpuready.pipeline import check_files

BOX_DRAWING = re.compile("[\u2500-\u259f]")
"""Box-drawing and block characters: none in piped output."""
WIDTH = 80
PROBLEMS = ("fail", "warn", "error")


def check_document(folder):
    """The document `gpuready check --bundle FOLDER --json` prints."""
    return check_files(read_bundle(folder), CheckOptions())[0].to_dict()


def render(document, width=WIDTH, terminal=False, **options):
    stream = io.StringIO()
    console = Console(file=stream, width=width, force_terminal=terminal, color_system=None)
    render_console(document, console, **options)
    return stream.getvalue()


def flat(text):
    """The text with every run of blanks and line breaks as one space: a wrapped sentence compares whole."""
    return " ".join(text.split())


@pytest.fixture(scope="module")
def h200():
    return check_document(FIXTURES / "h200-collect")


@pytest.fixture(scope="module")
def dgx():
    return check_document(PUBLIC / "dgx-h100-nvswitch")


def test_h200_bundle_at_80_columns_piped(h200):
    out = render(h200)
    lines = out.splitlines()
    assert lines[:4] == ["vm: READY WITH WARNINGS",
                         "(single node: READY WITH WARNINGS; multi node: READY WITH WARNINGS; verdict",
                         "judged for: single node)",
                         "0 fail, 1 warn, 47 pass, 12 skip"]
    assert lines[4:7] == ["1 × NVIDIA H200", "GPU  bus id        memory   CC   PCIe (cur/max)  power limit  temp ",
                          "0    0000:00:06.0  140 GiB  9.0  Gen5/5 x16/16   700 W        36 °C"]
    warn = next(f for f in h200["findings"] if f["status"] == "warn")
    assert "WARN host.memory_ratio" in lines
    assert flat(warn["message"]) in flat(out) and flat("fix: " + warn["fix"]) in flat(out)
    # passes: one line per category, counted as the JSON counts them, in the order categories first pass
    passed = Counter(f["category"] for f in h200["findings"] if f["status"] == "pass")
    assert [line for line in lines if line.endswith(" passed")] == [f"{c}: {n} passed" for c, n in passed.items()]
    assert "pcie: 5 passed" in lines and "16.0 logical CPUs per GPU." not in out  # a pass message is not shown
    assert lines[-1] == "12 check(s) skipped for lack of facts; --verbose lists them."
    assert not BOX_DRAWING.search(out) and max(map(len, lines)) <= WIDTH
    assert len(lines) <= 30  # one screen


def test_verbose_lists_every_finding(h200):
    out = render(h200, verbose=True)
    heads = [line for line in out.splitlines() if re.match(r"^(PASS|WARN|FAIL|SKIP|ERROR) ", line)]
    assert len(heads) == len(h200["findings"]) == 60
    assert "PASS host.cpu_per_gpu" in heads and flat("16.0 logical CPUs per GPU.") in flat(out)
    assert " passed" not in out


def test_a_fault_on_eight_gpus_is_one_row_naming_them_all(dgx):
    out = render(dgx)
    brakes = [f for f in dgx["findings"] if f["check_id"] == "power.brake" and f["status"] == "fail"]
    assert len(brakes) == 8
    assert out.count("FAIL power.brake") == 1
    assert "FAIL power.brake  GPU 0–7 (8 GPUs), machine 2 (driver 535.161.08)" in out.splitlines()
    # the sentence each GPU had, naming the group instead of one GPU, whole
    assert flat(brakes[0]["message"].replace("GPU0", "GPU 0–7")) in flat(out)
    assert flat("GPU 0–7's clocks are cut by the HW power brake (HW Slowdown: power brake, not thermal)") in flat(out)
    assert flat("bus ids: " + ", ".join(f["subject"]["gpu"]["bus_id"] for f in brakes)) in flat(out)
    assert flat("fix: " + brakes[0]["fix"]) in flat(out)
    assert out.index("FAIL power.brake") < out.index("WARN bundle.mixed_machines")  # worst first


def test_a_fault_on_six_of_eight_gpus_names_the_six(dgx):
    document = copy.deepcopy(dgx)
    for finding in document["findings"]:
        if finding["check_id"] == "power.brake" and (finding["subject"]["gpu"] or {}).get("index") in (6, 7):
            finding["status"] = "pass"
    out = render(document)
    assert "FAIL power.brake  GPU 0–5 (6 GPUs), machine 2 (driver 535.161.08)" in out.splitlines()
    assert flat("bus ids: 0000:19:00.0, 0000:3b:00.0, 0000:4c:00.0, 0000:5d:00.0, 0000:9b:00.0, 0000:bb:00.0") \
        in flat(out)
    assert "0000:cb:00.0, 0000:db:00.0" not in flat(out).split("bus ids:")[1].split("fix:")[0]


@pytest.mark.parametrize("case", ["dgx-h100-nvswitch", "xid", "nvidia-smi-q-xml", "pcie-x8", "ecc-errors"])
@pytest.mark.parametrize("terminal", [False, True])
def test_every_bus_id_and_problem_message_appears_whole(case, terminal):
    document = check_document(PUBLIC / case)
    out = render(document, terminal=terminal)
    assert max(map(len, out.splitlines())) <= WIDTH
    if not terminal:
        assert not BOX_DRAWING.search(out)
    words = set(out.split())
    for finding in document["findings"]:
        gpu = finding["subject"]["gpu"]
        if gpu and gpu.get("bus_id") and finding["status"] in PROBLEMS:
            assert any(gpu["bus_id"] in word for word in words), gpu["bus_id"]
        if finding["status"] in PROBLEMS:
            shown = flat(finding["message"])
            grouped = re.sub(r"\bGPU\d+(?!\d)", "GPU", shown)
            assert shown in flat(out) or grouped in re.sub(r"\bGPU [\d–, ]+?(?=[ ':)])", "GPU", flat(out)), shown
    for gpu in document["facts"].get("gpus", []):
        if gpu.get("bus_id"):
            assert gpu["bus_id"] in words


def test_rows_differing_in_a_figure_stay_apart():
    """Lifetime ECC counts differ per GPU (7 and 4): two rows, never one that hides a figure."""
    out = render(check_document(PUBLIC / "nvidia-smi-q-xml"))
    assert out.count("WARN health.ecc_uncorrected") == 2
    assert "WARN gpu.persistence  GPU 0–3 (4 GPUs)" in out.splitlines()
    assert "  bus ids: 1580:00:00.0, 2df7:00:00.0, 4968:00:00.0, f8d6:00:00.0" in out.splitlines()


def test_a_group_fix_with_an_nvidia_smi_index_names_every_gpu():
    document = {"host": "n1", "verdict": "not_ready", "findings": [
        {"check_id": "health.ecc", "status": "fail", "subject": {"host": "n1", "gpu": {"index": i, "bus_id": bus}},
         "message": f"GPU{i} ({bus}) has pending row remaps.", "fix": f"nvidia-smi -q -d ROW_REMAPPER -i {i}"}
        for i, bus in ((0, "0000:19:00.0"), (1, "0000:3b:00.0"))]}
    out = render(document)
    assert "FAIL health.ecc  GPU 0, 1 (2 GPUs)" in out
    assert flat("GPU 0, 1 (0000:19:00.0, 0000:3b:00.0) has pending row remaps.") in flat(out)
    assert "fix: nvidia-smi -q -d ROW_REMAPPER -i 0,1" in out


def test_gpu_lists_are_compact():
    def gpus(*indices):
        return [Gpu(index=i) for i in indices]
    assert gpu_list_label(gpus(0, 1, 2, 3, 4, 5)) == "GPU 0–5"
    assert gpu_list_label(gpus(0, 2, 3, 4, 7)) == "GPU 0, 2–4, 7"
    assert gpu_list_label(gpus(0, 1)) == "GPU 0, 1"
    assert gpu_list_label([Gpu(index=2, cuda_index=0), Gpu(index=3, cuda_index=1)]) == "GPU 2 (cuda:0), 3 (cuda:1)"
    assert gpu_list_label([Gpu(index=None, bus_id="0000:19:00.0"), Gpu(index=None, bus_id="0000:3b:00.0")]) == \
        "GPU 0000:19:00.0, 0000:3b:00.0"


def test_the_verdict_names_the_machine_of_the_evidence(dgx):
    assert render(check_document(PUBLIC / "xid")).startswith("unknown host: NOT READY\n")
    assert render(dgx).startswith("4 machines: NOT READY\n")
    assert render({"verdict": "ready"}).startswith("unknown host: READY\n")
    assert render(dgx, lang="zh").startswith("4 台机器: 未就绪 NOT READY\n")
    assert render(check_document(PUBLIC / "xid"), lang="zh").startswith("未知主机 unknown host: 未就绪 NOT READY\n")


def test_each_machine_shows_its_own_gpus(dgx):
    """Files from 4 machines: each machine's GPUs under its name (the table showed the first machine's only), and a
    model that 8 GPUs share said once, so a GPU is one line at 80 columns."""
    out = render(dgx)
    lines = out.splitlines()
    for machine in dgx["facts"]["machines"]:
        assert machine["machine"] in lines
        assert all(gpu["bus_id"] in out for gpu in machine["gpus"] if gpu["bus_id"])
    assert lines.count("8 × NVIDIA H100 80GB HBM3") == 3  # the 4th machine's files (topology) name no model
    assert "0    0000:19:00.0  80 GiB  ?   Gen?/? x?/?     700 W        27 °C" in lines
    assert "0    0000:18:00.0  80 GiB  ?   Gen5/5 x16/16   700 W        30 °C" in lines


def test_chinese_wraps_between_characters_and_never_before_closing_punctuation(dgx):
    """rich wraps at spaces only, and moved a whole Chinese clause to the next line; a CJK line breaks between
    characters (the line is filled) but never puts `，` or `）` at the start of a line."""
    lines = render(dgx, lang="zh").splitlines()
    start = lines.index("  这些文件来自 4 台机器（主机名或 NVIDIA 驱动不同），已逐台判断，没有当作一台机")
    assert lines[start + 1].startswith("  器：machine 1 (driver 550.90.07)")
    assert not [line for line in lines if line.lstrip()[:1] in tuple("，。、；：）")]
    assert max(map(cell_len, lines)) <= WIDTH


def test_a_cpu_only_run_prints_no_machine_verdict():
    document = {"host": "laptop", "verdict": "ready", "verdicts": {"single_node": "ready", "multi_node": "ready"},
                "facts": {"validate": {"wall_s": 28.4, "ranks": [0, 1]}},
                "findings": [{"check_id": "ddp.smoke", "status": "pass", "message": "DDP ran."}]}
    out = render(document)
    assert out.splitlines()[:3] == ["NO VERDICT: a CPU-only run (gloo) tests the software stack, not a verdict on a",
                                    "machine's GPUs", "0 fail, 0 warn, 1 pass, 0 skip"]
    assert "READY" not in out and "laptop" not in out
    assert "仅 CPU 运行" in render(document, lang="zh")


def test_chinese_labels_on_a_faulty_bundle(dgx):
    out = render(dgx, lang="zh")
    assert "失败 FAIL power.brake  GPU 0–7 (8 块 GPU), machine 2 (driver 535.161.08)" in out.splitlines()
    assert "总线号 bus ids: 0000:19:00.0" in flat(out) and "修复 fix: 检查每个 PSU 都在位、通电且健康" in flat(out)
    assert "GPU：23 项通过" in out and "184 项检查因缺少信息而跳过" in out  # category names from the catalogue


def test_the_terminal_keeps_frames_only_where_they_cut_nothing():
    document = json.loads((FIXTURES / "h200-bench" / "bench-1.3B-amp-bf16-mb4.json").read_text())
    piped, terminal = render(document), render(document, terminal=True)
    assert not BOX_DRAWING.search(piped) and BOX_DRAWING.search(terminal)
    for out in (piped, terminal):
        assert "42,681 tokens/s" in out and max(map(len, out.splitlines())) <= WIDTH

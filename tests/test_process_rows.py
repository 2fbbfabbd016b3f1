"""The rows of nvidia-smi's Processes block pasted without the table around them, and the other ranks' CUDA contexts
they show on one GPU (ddp.ranks_share_gpu0).

Evidence, none of it from the real case that showed the gap (pytorch/pytorch#49481):
- the rows of GPU 5 in yyliu01/PS-MT#20 (tests/fixtures/evidence-classes/nvidia-smi-processes-ddp-psmt-20.txt), a
  4-rank DDP run whose first rank's GPU holds the three other ranks' contexts (1387 MiB each);
- rows of GPUs 3 and 4 as quoted, without their table, in NVIDIA/DeepLearningExamples#776 (8 ranks, each with a
  0 MiB context on every GPU);
- the rows of XuehaiPan/nvitop#152 (one compute process on two GPUs, X and gnome-shell), driver 535 layout;
- Windows rows built from nvidia-smi's row format with the values `nvidia-smi -q` printed in NVIDIA/nvidia-docker#1458
  (C+G, memory `Not available in WDDM driver model`, which the table prints as N/A);
- a 5-column row of drivers before 450 built from the header `GPU PID Type Process name Usage` of m0nad/Diamorphine#13
  (driver 410.48);
- look-alikes that must stay unrecognised: `ps aux` (m0nad/Diamorphine#13), `nvidia-smi --query-compute-apps` CSV,
  `nvidia-smi pmon`, the MIG devices block (XuehaiPan/nvitop#8).
"""

from __future__ import annotations

import time
from pathlib import Path

from gpuready.checks.registry import run_checks
from gpuready.evidence.sniff import kind_of
from gpuready.facts.nvidia_smi_plain import parse_nvidia_smi_plain, process_rows_alone
from gpuready.facts.types import Facts, GpuProcess
from gpuready.model import Status, Verdict
from gpuready.verbs.diagnose.run import diagnose

MIB = 2**20
FIXTURES = Path(__file__).parent / "fixtures" / "evidence-classes"

# yyliu01/PS-MT#20, GPU 5's rows: rank 0 (2885 MiB) and the contexts of ranks 1-3 (1387 MiB each)
PSMT_GPU5 = [
    "|    5   N/A  N/A     26598      C   ...da/envs/ps-mt/bin/python3     2885MiB |",
    "|    5   N/A  N/A     26599      C   ...da/envs/ps-mt/bin/python3     1387MiB |",
    "|    5   N/A  N/A     26600      C   ...da/envs/ps-mt/bin/python3     1387MiB |",
    "|    5   N/A  N/A     26601      C   ...da/envs/ps-mt/bin/python3     1387MiB |",
]
# NVIDIA/DeepLearningExamples#776, as quoted there (no header): each rank has a context on GPUs 3 and 4
DLE_776 = """|    3   N/A  N/A     12439      C   /opt/conda/bin/python3              0MiB |
|    3   N/A  N/A     12440      C   /opt/conda/bin/python3              0MiB |
|    3   N/A  N/A     12441      C   /opt/conda/bin/python3              0MiB |
|    3   N/A  N/A     12442      C   /opt/conda/bin/python3           9347MiB |
|    3   N/A  N/A     12443      C   /opt/conda/bin/python3              0MiB |
|    3   N/A  N/A     12444      C   /opt/conda/bin/python3              0MiB |
|    3   N/A  N/A     12476      C   /opt/conda/bin/python3              0MiB |
|    3   N/A  N/A     12477      C   /opt/conda/bin/python3              0MiB |
|    4   N/A  N/A     12439      C   /opt/conda/bin/python3              0MiB |
|    4   N/A  N/A     12440      C   /opt/conda/bin/python3              0MiB |
|    4   N/A  N/A     12441      C   /opt/conda/bin/python3              0MiB |
|    4   N/A  N/A     12442      C   /opt/conda/bin/python3              0MiB |
|    4   N/A  N/A     12443      C   /opt/conda/bin/python3           9347MiB |
|    4   N/A  N/A     12444      C   /opt/conda/bin/python3              0MiB |
|    4   N/A  N/A     12476      C   /opt/conda/bin/python3              0MiB |
|    4   N/A  N/A     12477      C   /opt/conda/bin/python3              0MiB |
"""
# XuehaiPan/nvitop#152 (driver 535 widths), its rows only
NVITOP_152 = """|    0   N/A  N/A     10734      C   ...-x86_64-Release/abcdefgh/foo_bar         160MiB |
|    0   N/A  N/A     58661      G   .../abcdefgh/123456/bin/abcde/bazbaz          3MiB |
|    1   N/A  N/A     10734      C   ...-x86_64-Release/abcdefgh/foo_bar         160MiB |
|    2   N/A  N/A     18243      G   /usr/bin/X                                   64MiB |
|    2   N/A  N/A     22720      G   /usr/bin/gnome-shell                         34MiB |
"""
# NVIDIA/nvidia-docker#1458's -q processes as the table prints them on Windows (WDDM: memory N/A)
WINDOWS = """|    0   N/A  N/A      2936    C+G   ...n1h2txyewy\\TextInputHost.exe      N/A      |
|    0   N/A  N/A      2964    C+G   ...icrosoft\\Teams\\current\\Teams.exe    N/A      |
|    0   N/A  N/A      4824    C+G   ...perienceHost.exe                   N/A      |
"""
# drivers before 450: `|  GPU       PID   Type   Process name                             Usage      |` (Diamorphine#13)
OLD_DRIVER = """|    0     87315      C   python                                       439MiB |
|    0     87400      G   /usr/bin/X                                    10MiB |
"""


def _write(tmp_path: Path, text: str, name: str = "smi.txt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _share_finding(report):
    return [f for f in report.findings if f.check_id == "ddp.ranks_share_gpu0"]


# --- recognised and read -----------------------------------------------------------------------------------------

def test_rows_alone_with_the_first_left_border_cut_are_a_plain_nvidia_smi_paste():
    """The first row lost its `| ` in the paste, the others keep both borders."""
    text = "\n".join([PSMT_GPU5[0][2:]] + PSMT_GPU5[1:]) + "\n"
    assert kind_of(text) == "nvidia-smi.txt"
    processes = parse_nvidia_smi_plain(text).processes
    assert [(gpu, p.pid, p.kind, p.name, p.used_memory_bytes) for gpu, p in processes] == [
        (5, 26598, "C", "...da/envs/ps-mt/bin/python3", 2885 * MIB)] + [
        (5, pid, "C", "...da/envs/ps-mt/bin/python3", 1387 * MIB) for pid in (26599, 26600, 26601)]


def test_rows_without_any_border_indented_or_between_blank_lines_are_read():
    text = "\n\n".join("    " + row.strip("| ") for row in PSMT_GPU5) + "\n"
    assert kind_of(text) == "nvidia-smi.txt"
    assert [p.pid for _, p in parse_nvidia_smi_plain(text).processes] == [26598, 26599, 26600, 26601]


def test_rows_behind_a_short_question_are_still_the_paste():
    text = "Why does the first GPU use more memory? See below.\n\n" + "\n".join(PSMT_GPU5) + "\n"
    assert kind_of(text) == "nvidia-smi.txt"


def test_every_layout_of_the_row_is_read():
    """GI/CI columns (>= 450) and the 5-column row of older drivers; C, G, C+G; memory N/A on Windows."""
    newer = parse_nvidia_smi_plain(NVITOP_152).processes
    assert [(gpu, p.pid, p.kind, p.used_memory_bytes) for gpu, p in newer] == [
        (0, 10734, "C", 160 * MIB), (0, 58661, "G", 3 * MIB), (1, 10734, "C", 160 * MIB), (2, 18243, "G", 64 * MIB),
        (2, 22720, "G", 34 * MIB)]
    windows = parse_nvidia_smi_plain(WINDOWS).processes
    assert [(p.pid, p.kind, p.name, p.used_memory_bytes) for _, p in windows][:2] == [
        (2936, "C+G", "...n1h2txyewy\\TextInputHost.exe", None),
        (2964, "C+G", "...icrosoft\\Teams\\current\\Teams.exe", None)]
    old = parse_nvidia_smi_plain(OLD_DRIVER).processes
    assert [(gpu, p.pid, p.kind, p.name, p.used_memory_bytes) for gpu, p in old] == [
        (0, 87315, "C", "python", 439 * MIB), (0, 87400, "G", "/usr/bin/X", 10 * MIB)]
    for text in (NVITOP_152, WINDOWS, OLD_DRIVER, DLE_776):
        assert kind_of(text) == "nvidia-smi.txt"


def test_the_table_with_its_header_reads_as_before():
    """The Processes block of a whole table: its rows after the header, none of the GPU table's lines."""
    text = (FIXTURES / "nvidia-smi-processes-ddp-psmt-20.txt").read_text()
    processes = parse_nvidia_smi_plain(text).processes
    assert [(gpu, p.pid) for gpu, p in processes][:2] == [(5, 26598), (5, 26599)] and len(processes) == 7


# --- not rows ----------------------------------------------------------------------------------------------------

LOOK_ALIKES = {
    # m0nad/Diamorphine#13
    "ps aux": "centos    87354  0.0  0.0 112724   988 pts/1    S+   02:44   0:00 grep --color=auto 87315\n"
              "centos    87315 99.0  2.1 912724 98812 ?        Rl   02:40   4:00 python train.py\n",
    "query-compute-apps csv": "pid, process_name, used_gpu_memory [MiB]\n26598, python3, 2885 MiB\n"
                              "26599, python3, 1387 MiB\n26600, python3, 1387 MiB\n",
    "pmon": "# gpu         pid   type     sm    mem    enc    dec    command\n"
            "# Idx           #    C/G      %      %      %      %    name\n"
            "    0      26598     C     45     12      -      -    python3\n"
            "    0      26599     C      0      0      -      -    python3\n",
    # XuehaiPan/nvitop#8
    "MIG devices": "|  1    3   0   0  |  14366MiB / 19968MiB | 28      0 |  2   0    1    0    0 |\n"
                   "|                  |      4MiB / 32767MiB |           |                       |\n"
                   "|  1    5   0   1  |   9880MiB / 19968MiB | 28      0 |  2   0    1    0    0 |\n"
                   "|                  |      4MiB / 32767MiB |           |                       |\n",
    "numbers": "1 2 3 4 5 MiB\n6 7 8 9 10 MiB\n0 12 34 C x\n",
}


def test_look_alike_lines_stay_unrecognised():
    for name, text in LOOK_ALIKES.items():
        assert kind_of(text) is None, name
        assert parse_nvidia_smi_plain(text).processes is None, name


def test_one_row_alone_or_a_long_log_quoting_rows_is_no_paste_of_rows():
    assert not process_rows_alone(PSMT_GPU5[0] + "\n")
    log = "".join(f"step {step} loss 0.{step:04d}\n" for step in range(40)) + "\n".join(PSMT_GPU5) + "\n"
    assert kind_of(log) is None


def test_reading_rows_is_linear_on_long_lines_of_near_rows():
    """Near-rows whose end never comes, and a long line of cells: each line is looked at once."""
    near = ("|    0   N/A  N/A   1234      C   " + "a " * 60 + "  12MiB x\n") * 4000
    wide = "|    0   N/A  N/A   1234      C   " + "N/A " * 50000 + "\n"
    for text in (near, wide):
        started = time.perf_counter()
        kind_of(text)
        parse_nvidia_smi_plain(text)
        assert time.perf_counter() - started < 2.0


# --- the ranks' contexts on one GPU ------------------------------------------------------------------------------

def _check(table):
    facts = Facts(process_table=table)
    return [f for f in run_checks(facts) if f.check_id == "ddp.ranks_share_gpu0"][0]


def test_equal_small_contexts_of_one_program_beside_its_large_process_warn(tmp_path):
    """PS-MT#20's GPU 5 alone (the table cut to that GPU): rank 0 with 2885 MiB and three contexts of 1387 MiB."""
    report = diagnose([_write(tmp_path, "\n".join([PSMT_GPU5[0][2:]] + PSMT_GPU5[1:]) + "\n")])
    [finding] = _share_finding(report)
    assert finding.status == Status.WARN and finding.message_id == "ddp.ranks_share_gpu0.contexts"
    assert finding.observed == {"gpu": 5, "pids": [26599, 26600, 26601], "memory_bytes": 3 * 1387 * MIB,
                                "large_pid": 26598}
    assert "set_device(local_rank)" in finding.fix and len(finding.refs) == 2
    # a process table names no GPU: not enough evidence for a verdict, the finding still reported
    assert report.verdict() == Verdict.UNKNOWN
    assert not [f for f in report.findings if f.check_id == "gpu.present" and f.status == Status.FAIL]


def test_cross_gpu_contexts_without_a_header_keep_the_cross_gpu_rule(tmp_path):
    """DeepLearningExamples#776: the same 8 pids on GPUs 3 and 4 (0 MiB contexts): the rule that was."""
    [finding] = _share_finding(diagnose([_write(tmp_path, DLE_776)]))
    assert finding.message_id == "ddp.ranks_share_gpu0.shared"
    assert finding.observed["gpu"] == 3 and len(finding.observed["pids"]) == 8


def _gpu0(sizes_mib, name="python", kinds=None):
    kinds = kinds or ["C"] * len(sizes_mib)
    return [(0, GpuProcess(pid=100 + i, name=name, kind=kind, used_memory_bytes=None if size is None else size * MIB))
            for i, (size, kind) in enumerate(zip(sizes_mib, kinds))]


def test_what_is_not_the_ranks_contexts_passes():
    cases = {
        "two processes only": _gpu0([20000, 600]),
        "contexts of different sizes": _gpu0([20000, 600, 900, 1200]),
        "small ones too large for contexts": _gpu0([40000, 5000, 5000, 5000]),
        "all alike (several equal workers)": _gpu0([800, 800, 800, 800]),
        "the large one not twice a context": _gpu0([1100, 800, 800]),
        "no memory printed (Windows)": _gpu0([None, None, None]),
        "0 MiB is no context size": _gpu0([1733, 0, 0, 0]),
        "graphics processes": _gpu0([20000, 600, 600], kinds=["C", "G", "G"]),
    }
    for name, table in cases.items():
        assert _check(table).status == Status.PASS, name
    mixed = _gpu0([20000, 600]) + [(0, GpuProcess(pid=200, name="other", kind="C", used_memory_bytes=600 * MIB))]
    assert _check(mixed).status == Status.PASS  # different programs are not one job


def test_contexts_within_the_same_size_tolerance_warn():
    """871 MiB and 900 MiB are one size (within 64 MiB); M+C (an MPS client) is a compute process."""
    finding = _check(_gpu0([26167, 871, 900, 871], kinds=["C", "C", "M+C", "C"]))
    assert (finding.status, finding.observed["pids"], finding.observed["large_pid"]) == (Status.WARN, [101, 102, 103],
                                                                                          100)
    assert "(871 MiB each" not in finding.message and "900 MiB each" in finding.message
